package redistest

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DelayProxy is a TCP forwarder in front of a server that holds back every reply (server to client)
// by a delay that may change at any time (Set), so a loopback server behaves like a distant one (a
// round trip costs the delay). Requests pass at once; replies keep their order. It needs no
// fault-injection library (toxiproxy's latency toxic deadlocks when it is removed while a
// connection through it closes; the chaos suite's proxies delay replies with this instead).
type DelayProxy struct {
	s        *Server // nil when started with NewDelayProxy
	upstream string
	ln       net.Listener
	delay    atomic.Int64 // ns
	jitter   atomic.Int64 // ns
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	done     chan struct{} // closed when the proxy closes: replies still held back are dropped
}

// StartDelayProxy starts a DelayProxy to s on a free 127.0.0.1 port, delaying replies by d. It is
// stopped, with every connection through it, when the test ends.
func (s *Server) StartDelayProxy(t testing.TB, d time.Duration) *DelayProxy {
	t.Helper()
	p := NewDelayProxy(t, s.Addr())
	p.s = s
	p.Set(d, 0)
	return p
}

// NewDelayProxy starts a DelayProxy to upstream ("host:port") on a free 127.0.0.1 port, passing
// replies at once until Set. It is stopped, with every connection through it, when the test ends.
func NewDelayProxy(t testing.TB, upstream string) *DelayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: delay proxy: %v", err)
	}
	p := &DelayProxy{upstream: upstream, ln: ln, conns: make(map[net.Conn]struct{}), done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Set makes replies wait d ± jitter from when they arrive (d = 0: they pass at once); it applies to
// the replies of open connections too. Safe for concurrent use.
func (p *DelayProxy) Set(d, jitter time.Duration) {
	p.delay.Store(int64(d))
	p.jitter.Store(int64(jitter))
}

// wait is the delay of a reply arriving now.
func (p *DelayProxy) wait() time.Duration {
	w := time.Duration(p.delay.Load())
	if j := time.Duration(p.jitter.Load()); j > 0 && w > 0 {
		w += time.Duration(rand.Int64N(int64(2*j))) - j
	}
	return w
}

// Addr returns the proxy's address.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// Options returns the server's client options (see Server.Options) with the proxy's address; only
// for a proxy started with Server.StartDelayProxy.
func (p *DelayProxy) Options() *redis.Options {
	o := p.s.Options()
	o.Addr = p.Addr()
	return o
}

// Close stops the proxy: every connection through it is closed and the replies it still holds back
// are dropped (as a network partition would drop them). Tests need not call it: the proxy is closed
// when the test ends.
func (p *DelayProxy) Close() { p.close() }

// track registers c for closing; it reports false (and closes c) once the proxy is closed.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = server.Close()
			return
		}
		p.wg.Add(3)
		go func() { // requests: at once
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			_ = server.Close()
		}()
		type chunk struct {
			b  []byte
			at time.Time
		}
		replies := make(chan chunk, 256)
		go func() { // replies: stamped on arrival
			defer p.wg.Done()
			defer close(replies)
			for {
				b := make([]byte, 32<<10)
				n, err := server.Read(b)
				if n > 0 {
					replies <- chunk{b[:n], time.Now()}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // and passed on once their delay is over
			defer p.wg.Done()
			defer client.Close()
			for c := range replies {
				if w := time.Until(c.at.Add(p.wait())); w > 0 {
					t := time.NewTimer(w) // the injected latency itself
					select {
					case <-t.C:
					case <-p.done:
						t.Stop()
						_ = server.Close()
						continue // (drain: the reader ends with the server connection)
					}
				}
				if _, err := client.Write(c.b); err != nil {
					_ = server.Close()
				}
			}
		}()
	}
}

func (p *DelayProxy) close() {
	select {
	case <-p.done:
		return
	default:
		close(p.done)
	}
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

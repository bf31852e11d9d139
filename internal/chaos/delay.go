package chaos

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// delayer is the first stage of a Proxy: a TCP forwarder that holds back replies (server to
// client) by a delay that can change at any time. It replaces toxiproxy's latency toxic, which
// deadlocks when it is removed while a connection through it closes (the toxic's goroutine blocks
// handing on a reply while the removal holds the lock the closing connection needs).
type delayer struct {
	ln       net.Listener
	upstream string
	delay    atomic.Int64 // ns
	jitter   atomic.Int64 // ns
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{} // nil once closed
}

func newDelayer(upstream string) (*delayer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &delayer{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	d.wg.Add(1)
	go d.accept()
	return d, nil
}

func (d *delayer) addr() string { return d.ln.Addr().String() }

// set makes replies wait d ± jitter from when they arrive (0: pass at once).
func (d *delayer) set(delay, jitter time.Duration) {
	d.delay.Store(int64(delay))
	d.jitter.Store(int64(jitter))
}

func (d *delayer) wait() time.Duration {
	w := time.Duration(d.delay.Load())
	if j := time.Duration(d.jitter.Load()); j > 0 && w > 0 {
		w += time.Duration(rand.Int64N(int64(2*j))) - j
	}
	return w
}

func (d *delayer) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns == nil {
		_ = c.Close()
		return false
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *delayer) accept() {
	defer d.wg.Done()
	for {
		client, err := d.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", d.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !d.track(client) || !d.track(server) {
			_ = server.Close()
			return
		}
		d.wg.Add(3)
		go func() { // requests: at once
			defer d.wg.Done()
			_, _ = io.Copy(server, client)
			_ = server.Close()
		}()
		type chunk struct {
			b  []byte
			at time.Time
		}
		replies := make(chan chunk, 256)
		go func() { // replies: stamped when they arrive
			defer d.wg.Done()
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
		go func() { // and handed on once the delay current then is over (in order)
			defer d.wg.Done()
			defer client.Close()
			for c := range replies {
				if w := time.Until(c.at.Add(d.wait())); w > 0 {
					time.Sleep(w)
				}
				if _, err := client.Write(c.b); err != nil {
					_ = server.Close()
				}
			}
		}()
	}
}

func (d *delayer) close() {
	_ = d.ln.Close()
	d.mu.Lock()
	for c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
	d.mu.Unlock()
	d.wg.Wait()
}

package chaos_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// relay is a TCP forwarder on a free 127.0.0.1 port whose upstream can be changed at any time: the
// failover variant's stand-in for what moves a client to a new master (a Sentinel client that
// learns of the switch, a virtual IP that moves) and for a replica's link to its master, which can
// be cut. Set closes every connection through it, so that each client reconnects (to the new
// upstream) as after a +switch-master; while the upstream is "" it accepts connections and closes
// them at once, as a dead host's port would refuse them.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	up    string
	conns map[net.Conn]struct{} // both ends of every open connection; nil once closed
	wg    sync.WaitGroup
}

// newRelay starts a relay to upstream; it is stopped, with its connections, when the test ends.
func newRelay(t testing.TB, upstream string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	r := &relay{ln: ln, up: upstream, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// Addr returns the address to connect to.
func (r *relay) Addr() string { return r.ln.Addr().String() }

// Port returns the relay's port.
func (r *relay) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// Set makes new connections go to upstream ("": refused) and closes every open one.
func (r *relay) Set(upstream string) {
	r.mu.Lock()
	r.up = upstream
	open := r.conns
	if open != nil {
		r.conns = map[net.Conn]struct{}{}
	}
	r.mu.Unlock()
	for c := range open {
		_ = c.Close()
	}
}

// track registers the two ends of a connection made to up, unless the relay was closed or moved
// to another upstream meanwhile.
func (r *relay) track(up string, cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil || r.up != up {
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

// upstream returns where a new connection goes.
func (r *relay) upstream() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		up := r.upstream()
		if up == "" {
			_ = client.Close()
			continue
		}
		// A paused server's kernel still accepts: the dial succeeds and the requests wait, as
		// they would on a stalled host.
		server, err := net.DialTimeout("tcp", up, time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !r.track(up, client, server) { // moved while dialling
			_ = client.Close()
			_ = server.Close()
			continue
		}
		r.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer r.wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
			r.mu.Lock()
			delete(r.conns, dst)
			delete(r.conns, src)
			r.mu.Unlock()
		}
		go pipe(server, client)
		go pipe(client, server)
	}
}

func (r *relay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	open := r.conns
	r.conns = nil
	r.mu.Unlock()
	for c := range open {
		_ = c.Close()
	}
	r.wg.Wait()
}

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/rs/zerolog"
)

// Proxy is an in-process TCP proxy on a free 127.0.0.1 port in front of one upstream (a
// redis-server): a reply-delaying stage (Latency; redistest.DelayProxy) in front of a toxiproxy
// (the other faults, as toxics; its own latency toxic deadlocks when it is removed while a
// connection through it closes). Faults apply to the connections already open and to new ones until Clear. Its
// methods are safe for concurrent use and return errors rather than failing the test, so a
// fault-injecting goroutine may call them.
type Proxy struct {
	p  *toxiproxy.Proxy
	d  *redistest.DelayProxy
	mu sync.Mutex
	n  int
}

// NewProxy starts a proxy to upstream ("host:port"); it is stopped when the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", upstream)
	nop := zerolog.Nop()
	p.Logger = &nop
	if err := p.Start(); err != nil {
		t.Fatalf("chaos: start toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p, d: redistest.NewDelayProxy(t, p.Listen)}
}

// Addr returns the address clients connect to.
func (x *Proxy) Addr() string { return x.d.Addr() }

func (x *Proxy) add(typ, stream string, attrs string) error {
	x.mu.Lock()
	x.n++
	name := fmt.Sprintf("%s_%s_%d", typ, stream, x.n)
	x.mu.Unlock()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name, typ, stream, attrs)
	_, err := x.p.Toxics.AddToxicJson(strings.NewReader(js))
	return err
}

// Latency delays every reply (downstream) by d, ± jitter, until Clear.
func (x *Proxy) Latency(d, jitter time.Duration) error {
	x.d.Set(d, jitter)
	return nil
}

// Blackhole drops everything in both directions and closes each connection after d (0: never):
// the peer sees a silent connection, as across a partition.
func (x *Proxy) Blackhole(d time.Duration) error {
	for _, s := range []string{"upstream", "downstream"} {
		if err := x.add("timeout", s, fmt.Sprintf(`"timeout":%d`, d.Milliseconds())); err != nil {
			return err
		}
	}
	return nil
}

// ReplyLoss drops every reply (downstream) while requests still reach Redis, and closes each
// connection after d (0: never): a command runs, but its answer never comes back, so a client that
// retries on a new connection runs it again.
func (x *Proxy) ReplyLoss(d time.Duration) error {
	return x.add("timeout", "downstream", fmt.Sprintf(`"timeout":%d`, d.Milliseconds()))
}

// Reset resets (TCP RST) every connection as soon as the client sends something.
func (x *Proxy) Reset() error { return x.add("reset_peer", "upstream", `"timeout":0`) }

// Clear removes every fault: traffic flows again (data a blackhole dropped stays lost; replies
// held back by Latency pass at once).
func (x *Proxy) Clear() {
	x.d.Set(0, 0)
	x.p.Toxics.ResetToxics(context.Background())
}

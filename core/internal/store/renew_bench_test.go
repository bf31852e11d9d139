package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// serverCPU is the server's used_cpu_user + used_cpu_sys, in µs.
func serverCPU(tb testing.TB, srv *redistest.Server) float64 {
	tb.Helper()
	info, _ := srv.Do(tb, "INFO", "cpu").(string)
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			total += f
		}
	}
	return total * 1e6
}

// BenchmarkRenew measures a renewal round of 1000 held locks (the watchdog's batch) through
// Node.Renew, by the most locks per renew_many.lua call (chunk=1: one renew.lua per lock, as
// before batching): the server's CPU per renewal (INFO cpu), and the client's time and
// allocations per round.
func BenchmarkRenew(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	n := NewNode(rdb, "c:bench", &Config{})
	n.Fenced = true
	ctx := context.Background()
	items := make([]RenewItem, 1000)
	for i := range items {
		k := &Keys{}
		k.Init("lockkit:", "bench:"+strconv.Itoa(i))
		tok := NewToken()
		res, err := n.Acquire(ctx, &AcquireReq{Keys: k, Token: tok, Hold: "0", TTL: time.Hour})
		if err != nil || !res.OK {
			b.Fatalf("acquire: %+v %v", res, err)
		}
		k.Held(res.Fence)
		items[i] = RenewItem{K: k, Token: any(tok), TTL: 3 * time.Second}
	}
	for _, chunk := range []int{1, 25, 50, 100, 250, 1000} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			n.renewChunk = chunk
			round := func() {
				if err := n.Renew(ctx, items); err != nil {
					b.Fatal(err)
				}
				for i := range items {
					if !items[i].OK {
						b.Fatalf("item %d: %v", i, items[i].Err)
					}
				}
			}
			round() // loads the script
			cpu0 := serverCPU(b, srv)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				round()
			}
			b.StopTimer()
			b.ReportMetric((serverCPU(b, srv)-cpu0)/float64(b.N*len(items)), "server-cpu-µs/renewal")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/renewal")
		})
	}
}

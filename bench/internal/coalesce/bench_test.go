package coalesce

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// processor sends one command and waits for its reply (a plain client, or a Sender).
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

const floorRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

// floorOp is one raw-floor lock + unlock sent with Process: SET NX EX, then EVALSHA (EVAL on
// NOSCRIPT), the shape of lockkit's script calls.
func floorOp(ctx context.Context, p processor, sha, key, token string) error {
	set := redis.NewBoolCmd(ctx, "set", key, token, "ex", 8, "nx")
	if err := p.Process(ctx, set); err != nil {
		return err
	}
	if !set.Val() {
		return fmt.Errorf("%s is taken", key)
	}
	del := redis.NewCmd(ctx, "evalsha", sha, 1, key, token)
	del.SetFirstKeyPos(3)
	err := p.Process(ctx, del)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		del = redis.NewCmd(ctx, "eval", floorRelease, 1, key, token)
		del.SetFirstKeyPos(3)
		err = p.Process(ctx, del)
	}
	return err
}

// BenchmarkSend: raw-floor lock + unlock per op, spread over g goroutines (each on its own key),
// sent by each way. ns/op is the inverse of the throughput of all goroutines together. Run
// alone: the variants are measured one after the other, not interleaved as in cmd/compare.
//
//	cd bench && go test -run '^$' -bench Send -benchmem ./internal/coalesce/
func BenchmarkSend(b *testing.B) {
	s := redistest.Start(b)
	variants := []struct {
		name string
		make func(*redis.Client) (processor, error)
	}{
		{"plain", func(rdb *redis.Client) (processor, error) { return rdb, nil }},
		{"auto", func(rdb *redis.Client) (processor, error) { return New(rdb, Threshold(1)) }},
		{"auto-ctx", func(rdb *redis.Client) (processor, error) { return New(rdb, Threshold(1), ContextBound()) }},
		{"auto-fullduplex", func(rdb *redis.Client) (processor, error) {
			return New(rdb, Threshold(1), PipelineOptions(&redis.AutoPipelineOptions{FullDuplex: true}))
		}},
		{"coalesce", func(rdb *redis.Client) (processor, error) { return New(rdb) }},
		{"coalesce-ctx", func(rdb *redis.Client) (processor, error) { return New(rdb, ContextBound()) }},
	}
	sha := redis.NewScript(floorRelease).Hash()
	for _, g := range []int{1, 16, 64} {
		for _, v := range variants {
			b.Run(fmt.Sprintf("g=%d/%s", g, v.name), func(b *testing.B) {
				o := s.Options()
				o.PoolSize = 128
				rdb := redis.NewClient(o)
				defer func() { _ = rdb.Close() }()
				p, err := v.make(rdb)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				run := func(n int64) error {
					var next atomic.Int64
					errs := make([]error, g)
					var wg sync.WaitGroup
					for i := range g {
						wg.Go(func() {
							key := fmt.Sprintf("bench:%d", i)
							for next.Add(1) <= n && errs[i] == nil {
								errs[i] = floorOp(ctx, p, sha, key, "token")
							}
						})
					}
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							return err
						}
					}
					return nil
				}
				if err := run(int64(20 * g)); err != nil { // warm-up: pool filled, script loaded
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				d0, p0 := int64(0), int64(0)
				snd, _ := p.(*Sender)
				if snd != nil {
					d0, p0 = snd.Stats()
				}
				if err := run(int64(b.N)); err != nil {
					b.Fatal(err)
				}
				if snd != nil {
					d, p := snd.Stats()
					b.ReportMetric(100*float64(d-d0)/float64(d-d0+p-p0), "%direct")
				}
			})
		}
	}
}

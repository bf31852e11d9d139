// Command demo shows lockkit working end to end. It needs no Redis: it starts an embedded server
// (miniredis, with TTLs that count down) unless -redis or REDIS_ADDR names a real one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("redis", os.Getenv("REDIS_ADDR"), "address of a real Redis (embedded when empty)")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	if addr == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return err
		}
		defer mr.Close()
		stop := make(chan struct{})
		defer close(stop)
		go func() { // let TTLs count down in real time
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					mr.FastForward(10 * time.Millisecond)
				case <-stop:
					return
				}
			}
		}()
		addr = mr.Addr()
		fmt.Println("embedded Redis at", addr)
	}
	ctx := context.Background()
	var locks []*core.Client
	for range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
		defer rdb.Close()
		c, err := core.New(rdb)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		locks = append(locks, c)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last int64
	errs := make(chan error, 3)
	for i, c := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				err := c.Do(ctx, "demo", 2*time.Second, func(ctx context.Context) error {
					l, _ := core.FromContext(ctx)
					mu.Lock()
					defer mu.Unlock()
					if l.Fence() <= last {
						return fmt.Errorf("fence %d not above %d", l.Fence(), last)
					}
					last = l.Fence()
					fmt.Printf("replica %d holds the lock, fence %d\n", i+1, l.Fence())
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Println("ok: 9 critical sections, fencing tokens strictly increasing")
	return nil
}

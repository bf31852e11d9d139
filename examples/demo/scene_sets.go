package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
)

// sceneSets: two replicas move money between three accounts. Each transfer locks both of its
// accounts at once, all or nothing (core.Client.DoAll), so transfers in opposite directions
// (A→B while B→A) never wait on each other for ever, and no account is ever in two transfers at
// once. The books balance at the end.
func sceneSets(ctx context.Context, s *scene) error {
	const (
		transfers = 12
		ttl       = 5 * time.Second
		work      = 15 * time.Millisecond
	)
	accounts := []string{"account:A", "account:B", "account:C"}
	var (
		mu      sync.Mutex
		balance = map[string]int{"account:A": 100, "account:B": 100, "account:C": 100}
		busy    = map[string]bool{}
		clash   int
		iv      []interval
	)
	var clients []*core.Client
	for range 2 {
		c, _, err := s.newLocks()
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	s.logf("%d transfers over 2 replicas between %d accounts; each locks its two accounts at once (DoAll)",
		transfers, len(accounts))
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, transfers)
	for j := range transfers {
		wg.Go(func() {
			from, to := accounts[j%3], accounts[(j+1+j/3%2)%3] // both directions between each pair
			r := j % 2
			tctx, span := s.tracing.tracer.Start(ctx, fmt.Sprintf("transfer %d", j+1))
			defer span.End()
			err := clients[r].DoAll(tctx, []string{from, to}, ttl, func(lctx context.Context) error {
				l, _ := core.FromContext(lctx) // one of the set's locks (each has its own fence)
				start := time.Now()
				mu.Lock()
				if busy[from] || busy[to] {
					clash++
				}
				busy[from], busy[to] = true, true
				mu.Unlock()
				ok := sleep(lctx, work)
				mu.Lock()
				balance[from] -= 10
				balance[to] += 10
				busy[from], busy[to] = false, false
				iv = append(iv, interval{label: fmt.Sprintf("%s→%s on rep. %d", from[8:], to[8:], r+1), start: start,
					end: time.Now(), fence: l.Fence()})
				mu.Unlock()
				if !ok {
					return lctx.Err()
				}
				return nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	s.timeline(t0, iv)
	sum := 0
	for _, a := range accounts {
		sum += balance[a]
	}
	s.check(clash == 0, "no account was in two transfers at once")
	s.check(sum == 300, "the books balance: %d in all (A %d, B %d, C %d)", sum, balance["account:A"],
		balance["account:B"], balance["account:C"])
	s.check(len(iv) == transfers, "all %d transfers ran, in opposite directions too, without a deadlock", transfers)
	return nil
}

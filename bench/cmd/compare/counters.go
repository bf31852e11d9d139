package main

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook that counts what one client sends: every command, and every round
// trip (a pipeline is one round trip however many commands it carries). Connection set-up
// (HELLO, CLIENT SETINFO) is left out. Pub/sub connections bypass hooks; their commands are taken
// from the server (see pubsubCommand).
type counter struct {
	cmds, trips atomic.Int64
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !uncounted(cmd.Name()) {
			c.cmds.Add(1)
			c.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if !uncounted(cmd.Name()) {
				n++
			}
		}
		if n > 0 {
			c.cmds.Add(int64(n))
			c.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// uncounted tells the commands a client sends that are no part of a lock's work: the connection's
// handshake, and INFO (lockkit's eviction check reads it once per server, in the background after
// the first acquisition; server-side, harnessCommand leaves it out too).
func uncounted(name string) bool {
	return name == "hello" || name == "client" || name == "info"
}

// pubsubCommand tells the commands that go over pub/sub connections: clients send them
// top-level (scripts cannot subscribe) but hooks do not see them.
func pubsubCommand(name string) bool {
	switch name {
	case "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "ping":
		return true
	}
	return false
}

// rig is the go-redis clients of one measurement, one per server, every one with the same
// options and a counter.
type rig struct {
	servers  []*server
	rdbs     []*redis.Client
	counters []*counter
	cpu0     []int64
}

// poolSize is the go-redis pool of every client: above the largest goroutine count, so that no
// library waits for a connection.
const poolSize = 128

func newRig(servers []*server) *rig {
	r := &rig{servers: servers}
	for _, s := range servers {
		c := &counter{}
		rdb := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: poolSize})
		rdb.AddHook(c)
		r.rdbs = append(r.rdbs, rdb)
		r.counters = append(r.counters, c)
	}
	return r
}

func (r *rig) close() {
	for _, rdb := range r.rdbs {
		_ = rdb.Close()
	}
}

// usage is what a measurement cost Redis, summed over the servers.
type usage struct {
	top   int64 // top-level commands sent by clients
	inner int64 // commands run inside scripts
	trips int64 // round trips
	cpu   int64 // server CPU (user + sys), µs
	calls map[string]int64
}

// begin zeroes the server statistics and the client counters.
func (r *rig) begin(ctx context.Context) error {
	r.cpu0 = r.cpu0[:0]
	for i, s := range r.servers {
		if err := s.resetStats(ctx); err != nil {
			return err
		}
		st, err := s.stats(ctx)
		if err != nil {
			return err
		}
		r.cpu0 = append(r.cpu0, st.cpuUsec)
		r.counters[i].cmds.Store(0)
		r.counters[i].trips.Store(0)
	}
	return nil
}

// end reads what the measurement since begin cost. Top-level commands are those the clients
// sent (counted by the hook) plus pub/sub commands (counted by the server); every other call the
// server counted ran inside a script.
func (r *rig) end(ctx context.Context) (usage, error) {
	u := usage{calls: map[string]int64{}}
	var total int64
	for i, s := range r.servers {
		st, err := s.stats(ctx)
		if err != nil {
			return u, err
		}
		if i >= len(r.cpu0) {
			return u, errors.New("rig.end without begin")
		}
		u.cpu += st.cpuUsec - r.cpu0[i]
		total += st.commands()
		for k, v := range st.calls {
			if harnessCommand(k) {
				continue
			}
			u.calls[k] += v
			if pubsubCommand(k) {
				u.top += v
				u.trips += v
			}
		}
		u.top += r.counters[i].cmds.Load()
		u.trips += r.counters[i].trips.Load()
	}
	u.inner = max(total-u.top, 0)
	return u, nil
}

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// recorder is a hook that records every command a client sends, as text.
type recorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n != "hello" && n != "client" {
			r.mu.Lock()
			r.cmds = append(r.cmds, fmt.Sprint(cmd.Args()))
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The raw floor built by hand for Process sends, and reads, what the typed calls do: the rows
// that differ only in how they send are comparable.
func TestProcessOps_matchTheTypedCalls(t *testing.T) {
	ss := testServers(t, 1)
	ctx := testCtx(t)
	run := func(ops func(rdb *redis.Client) floorOps, ttl time.Duration) ([]string, []any) {
		if err := ss[0].flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ss[0].admin.ScriptFlush(ctx).Err(); err != nil { // the first release meets NOSCRIPT
			t.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: ss[0].addr})
		defer func() { _ = rdb.Close() }()
		rec := &recorder{}
		rdb.AddHook(rec)
		o := ops(rdb)
		var got []any
		note := func(v any, err error) { got = append(got, v, err) }
		note(o.setNX(ctx, "k", "tok", ttl))   // free: taken
		note(o.setNX(ctx, "k", "other", ttl)) // held: refused
		note(o.release(ctx, "k", "other"))    // not the owner: 0
		note(o.release(ctx, "k", "tok"))      // the owner: 1
		note(o.release(ctx, "k", "tok"))      // gone: 0
		return rec.cmds, got
	}
	typed := func(rdb *redis.Client) floorOps { return typedOps{c: rdb, del: redis.NewScript(rawRelease)} }
	built := func(rdb *redis.Client) floorOps { return newProcessOps(rdb) }
	for _, ttl := range []time.Duration{8 * time.Second, 1500 * time.Millisecond, 300 * time.Millisecond} {
		wantCmds, want := run(typed, ttl)
		gotCmds, got := run(built, ttl)
		if !slices.Equal(gotCmds, wantCmds) {
			t.Errorf("ttl %v: sent\n%q\nwant (typed calls)\n%q", ttl, gotCmds, wantCmds)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ttl %v: results %v, want (typed calls) %v", ttl, got, want)
		}
		if fmt.Sprint(want) != "[true <nil> false <nil> 0 <nil> 1 <nil> 0 <nil>]" {
			t.Errorf("ttl %v: typed calls gave %v", ttl, want)
		}
	}
}

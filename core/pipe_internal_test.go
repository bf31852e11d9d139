package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core/internal/pipe"
	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// splitRunner sends acquire calls through a pipe.Sender and every other command straight out:
// the moment the Sender's threshold is crossed, a give-back's release can go out directly while
// the acquisition it gives back still waits in the pipeliner's queue.
type splitRunner struct {
	acquire *pipe.Sender
	rest    redis.UniversalClient
}

func (r splitRunner) Process(ctx context.Context, cmd redis.Cmder) error {
	if args := cmd.Args(); len(args) > 1 && args[1] == ScriptSHA1(script.Scripts().Acquire.Source) {
		return r.acquire.Process(ctx, cmd)
	}
	return r.rest.Process(ctx, cmd)
}

// An acquisition abandoned while it waited in the pipeliner's queue (its caller's context ended)
// runs later; the give-back must reach Redis after it, or the lock stays taken, by nobody, for its
// TTL. Here the pipeliner's one batch slot is held for a second by a slow reply, so the abandoned
// acquisition is sent about a second after its caller gave up, while everything else goes
// straight out to the server, without delay: the give-back's own retries (at 0, 50 and 500 ms)
// would all come before it.
func TestGiveBack_waitsForAnAcquisitionLeftInThePipeline(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, 0)
	rdb := redis.NewClient(px.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := context.Background()
	if err := rdb.ScriptLoad(ctx, script.Scripts().Acquire.Source).Err(); err != nil {
		t.Fatal(err)
	}
	c.st.(*store.Node).SetRunner(script.NewSender(splitRunner{acquire: pipe.New(rdb, 1), rest: srv.Client(t)})) // (the rest: no delay)

	ap, err := rdb.AsyncAutoPipeline() // the Sender's pipeliner: go-redis caches one per client
	if err != nil {
		t.Fatal(err)
	}
	px.Set(time.Second, 0)
	occupy := ap.Submit(ctx, redis.NewStatusCmd(ctx, "ping"))
	deadline := time.Now().Add(5 * time.Second)
	for srv.CommandStats(t)["ping"] == 0 { // the slow batch is on its way: the next one waits for it
		if time.Now().After(deadline) {
			t.Fatal("the pipeliner never sent its first batch")
		}
		time.Sleep(time.Millisecond)
	}
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = c.Acquire(actx, "left", 30*time.Second)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v, want the context's deadline", err)
	}
	_ = occupy.Wait()
	px.Set(0, 0)
	key := "lockkit:{left}"
	deadline = time.Now().Add(6 * time.Second)
	ran := false
	for {
		v, _ := srv.Do(t, "GET", key).(string)
		s, _ := ParseLockState(v)
		ran = ran || v != ""
		if ran && !s.Held() {
			return // the acquisition ran, and was given back
		}
		if time.Now().After(deadline) {
			t.Fatalf("6s after the caller gave up, %s = %q (ran: %v): the acquisition left in the pipeline was not given back", key, v, ran)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

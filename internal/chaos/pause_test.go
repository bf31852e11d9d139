package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/examples/fencing/fenced"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/pgtest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	pauseTTL    = 500 * time.Millisecond
	pauseWrites = 10 // writes the resumed holder attempts on each resource
)

// pauseResources returns the fenced resources of run i.
func pauseResources(rdb redis.Cmdable, db fenced.Execer, i int) (*fenced.Redis, *fenced.Postgres) {
	return fenced.NewRedis(rdb, "acct:{"+strconv.Itoa(i)+"}"), fenced.NewPostgres(db, int64(i))
}

// pauseChild is the holder: it takes the lock, writes once through both fenced resources, says
// "ready" (it has checked that it holds the lock) and blocks on stdin, where the parent stops it.
// When it reads "go" (after it was resumed) it writes with its fence, as a process does that checked
// its lock, was paused and carries on; then it reports when its lock's context was cancelled.
func pauseChild(addr, dsn string, in io.Reader, out io.Writer) error {
	ctx, cancel := background()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer rdb.Close()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	c, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	sc := bufio.NewScanner(in)
	for sc.Scan() { // one run per line "run <i>"
		i, _ := strconv.Atoi(strings.TrimPrefix(sc.Text(), "run "))
		res, row := pauseResources(rdb, db, i)
		l, err := c.Acquire(ctx, "acct-"+strconv.Itoa(i), pauseTTL)
		if err != nil {
			return err
		}
		if err := res.Write(ctx, l.Fence(), "child"); err != nil {
			return fmt.Errorf("first redis write: %w", err)
		}
		if err := row.Write(ctx, l.Fence(), "child"); err != nil {
			return fmt.Errorf("first postgres write: %w", err)
		}
		if l.Context().Err() != nil {
			return errors.New("lock lost before the pause")
		}
		fmt.Fprintf(out, "ready %d\n", l.Fence())
		if !sc.Scan() || sc.Text() != "go" {
			return errors.New("no go")
		}
		for range pauseWrites {
			fmt.Fprintf(out, "write redis %v\n", res.Write(ctx, l.Fence(), "stale") == nil)
			fmt.Fprintf(out, "write postgres %v\n", row.Write(ctx, l.Fence(), "stale") == nil)
		}
		<-l.Context().Done()
		var le *core.LostError
		if !errors.As(context.Cause(l.Context()), &le) {
			return fmt.Errorf("cause %v", context.Cause(l.Context()))
		}
		fmt.Fprintf(out, "lost %s %d\n", le.Reason, time.Now().UnixMicro())
		if err := l.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
			return fmt.Errorf("release after loss: %v", err)
		}
	}
	return sc.Err()
}

// runPause stops the holder (SIGSTOP) past its TTL while another client takes the lock and writes;
// on SIGCONT every write of the resumed holder through the fenced Redis record and the fenced
// PostgreSQL row is rejected, and its lock context is cancelled at once.
func runPause(t *testing.T, rep *chaos.Report) {
	row := rep.Row("process pause (SIGSTOP > TTL), fenced writes")
	srv := redistest.Start(t)
	pg := pgtest.Start(t)
	rdb := srv.Client(t)
	db := pg.Connect(t)
	ctx := context.Background()
	other := locktest.NewClient(t, rdb)
	ch := startChild(t, "pause", "LOCKKIT_CHAOS_REDIS="+srv.Addr(), "LOCKKIT_CHAOS_PG="+pg.DSN())
	runs := pick(2, 10)
	for i := range runs {
		res, prow := pauseResources(rdb, db, i)
		if err := prow.Init(ctx); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(ch.stdin, "run %d\n", i)
		var f1 int64
		if _, err := fmt.Sscanf(ch.line(t, 10*time.Second), "ready %d", &f1); err != nil {
			t.Fatal(err)
		}
		row.Ops(3) // the child's acquisition and its two first writes
		if err := ch.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		row.Faults(1)
		o, err := other.Acquire(ctx, "acct-"+strconv.Itoa(i), pauseTTL, core.WithWait(5*pauseTTL))
		if err != nil {
			t.Fatalf("run %d: the other client did not get the paused holder's lock: %v", i, err)
		}
		if o.Fence() <= f1 {
			row.Violation(t, "run %d: fence %d after %d", i, o.Fence(), f1)
		}
		if err := res.Write(ctx, o.Fence(), "other"); err != nil {
			t.Fatalf("run %d: new holder's redis write: %v", i, err)
		}
		if err := prow.Write(ctx, o.Fence(), "other"); err != nil {
			t.Fatalf("run %d: new holder's postgres write: %v", i, err)
		}
		row.Ops(3)
		fmt.Fprintln(ch.stdin, "go") // read by the child when it resumes
		resumed := time.Now()
		if err := ch.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for range 2 * pauseWrites {
			var what string
			var ok bool
			if _, err := fmt.Sscanf(ch.line(t, 10*time.Second), "write %s %t", &what, &ok); err != nil {
				t.Fatal(err)
			}
			row.Ops(1)
			if ok {
				row.Violation(t, "run %d: the resumed holder's stale %s write (fence %d < %d) was accepted", i, what, f1, o.Fence())
			}
		}
		var why string
		var at int64
		if _, err := fmt.Sscanf(ch.line(t, 10*time.Second), "lost %s %d", &why, &at); err != nil {
			t.Fatal(err)
		}
		row.Detection(time.UnixMicro(at).Sub(resumed))
		if why != "expired" {
			t.Errorf("run %d: lost %s, want expired", i, why)
		}
		if f, v, err := res.Read(ctx); err != nil || f != o.Fence() || v != "other" {
			t.Errorf("run %d: redis record %d %q %v, want the new holder's", i, f, v, err)
		}
		var pf int64
		var pv string
		if err := db.QueryRow(ctx, "SELECT fence, value FROM fenced_records WHERE id = $1", i).Scan(&pf, &pv); err != nil || pf != o.Fence() || pv != "other" {
			t.Errorf("run %d: postgres row %d %q %v, want the new holder's", i, pf, pv, err)
		}
		if err := o.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_ = ch.stdin.Close()
	ch.wait(t, 10*time.Second)
}

// Command fencing shows why a lock needs fencing tokens, and how a resource uses them.
//
// Process A takes the lock and is paused (a GC pause, a VM migration, SIGSTOP) past the lock's TTL.
// Process B takes the expired lock and writes. A resumes and writes too: its lock context is about
// to be cancelled, but the write is already on its way. The resources below compare fences and
// reject A's write: a Redis record checked by a Lua script, and a PostgreSQL row checked by
// UPDATE … WHERE fence < $1.
//
//	go run ./examples/fencing                          # embedded Redis (miniredis)
//	go run ./examples/fencing -redis localhost:6379
//	go run ./examples/fencing -redis localhost:6379 -pg 'postgres://postgres@127.0.0.1:5432/test'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/examples/fencing/fenced"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("redis", "", "Redis address (default: an embedded Redis)")
	dsn := flag.String("pg", "", "PostgreSQL connection string (optional)")
	ttl := flag.Duration("ttl", time.Second, "lock TTL; process A pauses for twice as long")
	flag.Parse()
	if err := run(os.Stdout, *addr, *dsn, *ttl); err != nil {
		log.Fatal(err)
	}
}

// resource is what both processes write through.
type resource interface {
	Write(ctx context.Context, fence int64, value string) error
}

type named struct {
	name string
	r    resource
}

// run plays the scene, printing it to out.
func run(out io.Writer, addr, dsn string, ttl time.Duration) error {
	ctx := context.Background()
	if addr == "" {
		embedded, err := lockkittest.StartServer()
		if err != nil {
			return err
		}
		defer embedded.Close()
		addr = embedded.Addr()
		fmt.Fprintln(out, "embedded Redis (miniredis) at", addr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer rdb.Close()
	resources := []named{{"redis", fenced.NewRedis(rdb, "fencing-example:{account}")}}
	if dsn != "" {
		db, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer db.Close(ctx)
		row := fenced.NewPostgres(db, 42)
		if err := row.Init(ctx); err != nil {
			return err
		}
		resources = append(resources, named{"postgres", row})
	}
	// Two clients stand for two processes.
	procA, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer procA.Close(ctx)
	procB, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer procB.Close(ctx)

	a, err := procA.Acquire(ctx, "account", ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "A holds the lock, fence %d; A checks its lock, then pauses for %v\n", a.Fence(), 2*ttl)
	checked := a.Context().Err() == nil
	// procA's watchdog would keep renewing during a mere sleep; a real pause stops it too. Stop it
	// here the only way the API allows: let B find the lock expired by deleting it.
	stall(ctx, rdb, a, ttl)

	b, err := procB.Acquire(ctx, "account", ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "B holds the lock, fence %d\n", b.Fence())
	for _, x := range resources {
		name, r := x.name, x.r
		if err := r.Write(ctx, b.Fence(), "written by B"); err != nil {
			return fmt.Errorf("write of B to %s: %w", name, err)
		}
		fmt.Fprintf(out, "  B writes to %-8s accepted\n", name)
	}
	fmt.Fprintf(out, "A resumes; it checked its lock before the pause (held: %v) and writes\n", checked)
	for _, x := range resources {
		name, r := x.name, x.r
		err := r.Write(ctx, a.Fence(), "written by A")
		switch {
		case errors.Is(err, fenced.ErrStale):
			fmt.Fprintf(out, "  A writes to %-8s rejected: %v\n", name, err)
		case err != nil:
			return err
		default:
			fmt.Fprintf(out, "  A writes to %-8s ACCEPTED: the resource does not check fences\n", name)
			os.Exit(1)
		}
	}
	fmt.Fprintf(out, "A's lock context: %v\n", context.Cause(a.Context()))
	return b.Release(ctx)
}

// stall simulates A's pause: the lock leaves Redis as if its TTL ran out while A was stopped.
func stall(ctx context.Context, rdb *redis.Client, a *core.Lock, ttl time.Duration) {
	rdb.Del(ctx, a.Key())
	select {
	case <-a.Context().Done(): // A's watchdog notices at its next renewal
	case <-time.After(2 * ttl):
	}
}

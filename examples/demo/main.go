// Command demo is lockkit's guided tour: in about fifteen seconds it shows every part of the kit
// working against one Redis, in ten scenes, and ends with a summary table.
//
//	go run ./examples/demo                  # embedded Redis, nothing to install
//	go run ./examples/demo -redis host:6379 # or REDIS_ADDR=host:6379: a real Redis
//	go run ./examples/demo -scene 2 -trace  # one scene, with its spans as a tree
//
// The scenes: (1) three replicas contending for a lock, waiters woken by the release, fencing
// tokens increasing; (2) a lock lost behind its holder's back, and its context cancelled; (3) the
// HTTP idempotency middleware; (4) the gRPC interceptor serialising calls for one key; (5) asynq
// tasks of one key running one at a time across two workers; (6) a cron job on three replicas
// running once per tick; (7) a semaphore letting at most three exports of a tenant run at once
// across two replicas; (8) two gocron schedulers with skewed clocks running each run of a job once;
// (9) transfers locking both accounts at once, all or nothing, without deadlock; (10) a read-write
// lock: readers share, a writer runs alone, in arrival order.
//
// Every scene checks what it shows; the exit status is 0 only if every check held. With
// OTEL_EXPORTER_OTLP_ENDPOINT set, the traces are exported over OTLP/HTTP (see examples/jaeger).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lockkit/lockkit/lockkittest"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes of run.
const (
	exitOK     = 0 // every check held
	exitFailed = 1 // a check failed, or the demo could not run
	exitUsage  = 2 // bad flags
)

// run runs the demo with the given arguments and environment and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.Int("scene", 0, fmt.Sprintf("run only scene `N` (1-%d)", len(scenes)))
	addr := fs.String("redis", getenv("REDIS_ADDR"), "`address` of a real Redis, host:port or redis:// URL (default $REDIS_ADDR; embedded when empty)")
	quiet := fs.Bool("quiet", false, "print only the summary table")
	traceFlag := fs.Bool("trace", false, "print each scene's spans (lock.wait, lock.hold, lock.renew) as a tree")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./examples/demo [-scene N] [-redis addr] [-quiet] [-trace]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 || *only < 0 || *only > len(scenes) {
		fmt.Fprintf(stderr, "demo: -scene must be 1 to %d, and no arguments are taken\n", len(scenes))
		fs.Usage()
		return exitUsage
	}
	out := stdout
	if *quiet {
		out = io.Discard
	}

	d := &demo{out: out, runID: randomID()}
	if *addr == "" {
		embedded, err := lockkittest.StartServer()
		if err != nil {
			fmt.Fprintln(stderr, "demo: embedded Redis:", err)
			return exitFailed
		}
		defer embedded.Close()
		d.opts = &redis.Options{Addr: embedded.Addr(), DisableIdentity: true}
		fmt.Fprintf(out, "lockkit demo · embedded Redis (miniredis) at %s · -redis or REDIS_ADDR for a real one\n", embedded.Addr())
	} else {
		opts, err := redisOptions(*addr)
		if err != nil {
			fmt.Fprintln(stderr, "demo: -redis:", err)
			return exitUsage
		}
		version, err := pingRedis(ctx, opts)
		if err != nil {
			fmt.Fprintf(stderr, "demo: cannot reach Redis at %s: %v\n", opts.Addr, err)
			return exitFailed
		}
		d.opts = opts
		fmt.Fprintf(out, "lockkit demo · Redis %s at %s\n", version, opts.Addr)
	}

	tr, err := setupTracing(ctx, *traceFlag, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "demo: tracing:", err)
		return exitFailed
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.shutdown(sctx); err != nil {
			fmt.Fprintln(stderr, "demo: exporting traces:", err)
		}
	}()
	d.tracing = tr
	if tr.about != "" {
		fmt.Fprintln(out, tr.about)
	}

	start := time.Now()
	var results []result
	for i, sc := range scenes {
		if *only != 0 && *only != i+1 {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		results = append(results, d.runScene(ctx, i+1, sc))
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "demo: interrupted")
	}
	ok := printSummary(stdout, results, time.Since(start))
	if !ok || ctx.Err() != nil {
		return exitFailed
	}
	return exitOK
}

// redisOptions parses -redis: host:port, or a redis:// or rediss:// URL (with a password, a
// database number, TLS).
func redisOptions(addr string) (*redis.Options, error) {
	opts := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opts, err = redis.ParseURL(addr); err != nil {
			return nil, err
		}
	}
	opts.DisableIdentity = true // no CLIENT SETINFO, which older servers reject
	return opts, nil
}

// pingRedis checks that the server answers and returns its version.
func pingRedis(ctx context.Context, opts *redis.Options) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	o := *opts
	o.MaxRetries = -1
	rdb := redis.NewClient(&o)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "(unknown version)", nil
}

// randomID returns 8 hex digits that keep one run's idempotency keys and asynq queue apart from
// another's on a shared Redis.
func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Command lockkit inspects and operates lockkit's locks in Redis: who holds a lock, since when and
// how many wait; end a stuck hold; watch a lock change hands; read an idempotency record.
//
//	go install github.com/lockkit/lockkit/cmd/lockkit@latest
//
// Run "lockkit help" for the commands, the connection flags and the exit codes. It uses only the
// standard library, go-redis and lockkit's own packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// Exit codes.
const (
	exitOK       = 0 // done; for inspect, the lock or a permit of its semaphore is held
	exitFailed   = 1 // Redis could not be reached, refused a command, or answered unexpectedly
	exitUsage    = 2 // bad command line
	exitNotFound = 3 // inspect: the lock and its semaphore are free; release: neither was held; idem: no record
	exitAborted  = 4 // release: not confirmed
)

const help = `lockkit — inspect and operate lockkit's locks in Redis

Usage:
  lockkit ls [PATTERN]             list held locks and semaphore permits whose name matches the glob
                                   PATTERN (default *)
  lockkit inspect NAME             who holds NAME (and its semaphore's permits), since when, TTL, fence,
                                   fair waiters
  lockkit release --force NAME     delete NAME's lock and permits whoever holds them, wake waiters
                                   (asks for confirmation on stdin unless --yes)
  lockkit watch NAME               print acquisitions, handoffs, releases, expiries and waiters
                                   of NAME as they happen (--for D, or until interrupted)
  lockkit idem SCOPE KEY           the idempotency record PREFIXidem:{@SCOPE/KEY} (SCOPE: the
                                   adapter's namespace, e.g. http-idem, grpc-idem; KEY: the hash
                                   "lockkit ls '@http-idem/*'" shows): stored or not, in progress,
                                   kind, age (--retention, default 24h), TTL; the value only with
                                   --body. A SCOPE starting with @ is used as it is.
  lockkit help                     this text

Flags (every command; put them before or after the arguments):
  --url URL          redis://[user:pass@]host:port[/db], or rediss:// for TLS; default $REDIS_URL,
                     else redis://127.0.0.1:6379
  --cluster          Redis Cluster: --url names seed node(s) (repeat --url, or separate by commas)
  --sentinel ADDR    a Sentinel (repeatable) and --master NAME its master; --url gives the
                     credentials, db and TLS of the master
  --cacert FILE      the CA of a rediss:// server; --insecure skips verification
  --prefix P         the lockkit clients' key prefix (default lockkit:)
  --timeout D        per request (default 5s)
  --json             JSON output (ls, inspect, watch: one object per line, idem)
  release: --force (required), --yes; watch: --for D, --interval D (poll, default 100ms);
  idem: --body

Exit codes:
  0  done (inspect: the lock or a permit is held)
  1  Redis unreachable or a command failed
  2  usage error
  3  nothing there: inspect found the lock and permits free, release found nothing held, idem found
     no record
  4  release not confirmed

Token digests: a holder is shown by the first 12 hex digits of the SHA-256 of its owner token,
never the token. Redis commands used (for an ACL): see docs/security.md.
`

// usageError is a bad command line: exit code 2.
type usageError struct{ error }

// notFound ends a command with exit code 3 after its output.
var errNotFound = errors.New("not found")

// errAborted ends a release that was not confirmed.
var errAborted = errors.New("not confirmed: nothing released")

// quiet drops go-redis's log lines (dial retries); errors reach the user through the commands.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, help)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, help)
		return exitOK
	case "ls":
		err = cmdLs(ctx, args, stdout)
	case "inspect":
		err = cmdInspect(ctx, args, stdout)
	case "release":
		err = cmdRelease(ctx, args, stdin, stdout, stderr)
	case "watch":
		err = cmdWatch(ctx, args, stdout)
	case "idem":
		err = cmdIdem(ctx, args, stdout)
	default:
		err = usageError{fmt.Errorf("unknown command %q", cmd)}
	}
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errNotFound):
		return exitNotFound
	case errors.Is(err, errAborted):
		fmt.Fprintln(stderr, "lockkit:", err)
		return exitAborted
	case errors.Is(err, flag.ErrHelp):
		return exitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "lockkit %s: %v (see lockkit help)\n", cmd, ue.error)
		return exitUsage
	}
	fmt.Fprintf(stderr, "lockkit %s: %s\n", cmd, strings.TrimPrefix(err.Error(), "lockkit: "))
	return exitFailed
}

// parse parses flags placed before or after the positional arguments, and checks their number.
func parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) < min || len(pos) > max {
		if min == max {
			return nil, usageError{fmt.Errorf("want %d argument(s), got %d", min, len(pos))}
		}
		return nil, usageError{fmt.Errorf("want %d to %d arguments, got %d", min, max, len(pos))}
	}
	return pos, nil
}

// open connects as the flags say and returns the connection, a core.Client over it (which sends
// only what its methods need), and a function that closes both.
func (c *conn) open() (*core.Client, redis.UniversalClient, func(), error) {
	rdb, err := c.client()
	if err != nil {
		return nil, nil, nil, err
	}
	locks, err := core.New(rdb, core.WithPrefix(c.prefix))
	if err != nil {
		rdb.Close()
		return nil, nil, nil, usageError{err}
	}
	return locks, rdb, func() {
		_ = locks.Close(context.Background())
		_ = rdb.Close()
	}, nil
}

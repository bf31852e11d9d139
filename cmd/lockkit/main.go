// Command lockkit inspects and operates lockkit's locks in Redis: who holds a lock, since when and
// how many wait; end a stuck hold; watch a lock change hands; read an idempotency record.
//
// Install it from a clone of the repository (the modules are not published yet):
//
//	make cli                  # go install ./cmd/lockkit, stamped with the commit
//	go install ./cmd/lockkit  # the same, without the stamp where VCS stamping is off
//
// and, once the modules are published, from anywhere:
//
//	go install github.com/lockkit/lockkit/cmd/lockkit@latest
//
// Run "lockkit help" for the commands, the connection flags and the exit codes, and
// "lockkit help COMMAND" for a command's. It uses only the standard library, go-redis and
// lockkit's own packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// Exit codes.
const (
	exitOK       = 0 // done; for inspect, the name is held
	exitFailed   = 1 // Redis could not be reached, refused a command, or answered unexpectedly
	exitUsage    = 2 // bad command line
	exitNotFound = 3 // inspect: the name is free; release: nothing was held; idem: no record
	exitAborted  = 4 // release: not confirmed
	exitUnsafe   = 5 // doctor: a check found the deployment unsafe
)

// usageError is a bad command line: exit code 2. listed: the message lists the commands already.
type usageError struct {
	error
	listed bool
}

// errNotFound ends a command with exit code 3 after its output.
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
	name, rest, help, err := split(args)
	switch {
	case err != nil:
		return report(stderr, "", nil, err)
	case name == "" && (help || len(args) == 0):
		w, code := stdout, exitOK
		if !help {
			w, code = stderr, exitUsage
		}
		writeHelp(w)
		return code
	case name == "":
		return report(stderr, "", nil, usageError{error: errors.New(`no command given (see "lockkit help")`)})
	}
	cmd, ok := lookup(name)
	if !ok {
		return report(stderr, "", nil, unknownCommand(name))
	}
	if help {
		writeCommandHelp(stdout, cmd)
		return exitOK
	}
	e := &env{in: stdin, out: stdout, errOut: stderr}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.register(fs)
	body := cmd.setup(fs)
	pos, err := parse(fs, rest, cmd.min, cmd.max)
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(stdout, cmd)
		return exitOK
	}
	if err == nil {
		err = body(ctx, e, pos)
	}
	return report(stderr, name, e, err)
}

// report writes what went wrong (with a hint where one helps) and returns the exit code.
func report(w io.Writer, cmd string, e *env, err error) int {
	prefix := "lockkit"
	if cmd != "" {
		prefix += " " + cmd
	}
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errNotFound):
		return exitNotFound
	case errors.Is(err, errUnsafe):
		return exitUnsafe
	case errors.Is(err, errAborted):
		fmt.Fprintf(w, "%s: %v\n", prefix, err)
		return exitAborted
	case errors.As(err, &ue):
		fmt.Fprintf(w, "%s: %s\n", prefix, strings.TrimPrefix(ue.Error(), "lockkit: "))
		if !ue.listed && cmd != "" {
			fmt.Fprintf(w, "Run \"lockkit help %s\" for its usage.\n", cmd)
		}
		return exitUsage
	}
	fmt.Fprintf(w, "%s: %s\n", prefix, strings.TrimPrefix(err.Error(), "lockkit: "))
	if e != nil {
		if h := hint(err, e.target); h != "" {
			fmt.Fprintf(w, "hint: %s\n", h)
		}
	}
	return exitFailed
}

// split finds the command in a command line: the first argument that is neither a flag every
// command takes nor its value. It returns the command's name, the other arguments, and whether
// help was asked for with -h or --help before it.
func split(args []string) (name string, rest []string, help bool, err error) {
	global := globalFlags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			help = true
			continue
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], append(rest, args[i+2:]...), help, nil
			}
			return "", rest, help, nil
		case !strings.HasPrefix(a, "-") || a == "-":
			return a, append(rest, args[i+1:]...), help, nil
		}
		flagName, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := global.Lookup(flagName)
		if f == nil {
			return "", nil, help, usageError{error: fmt.Errorf("unknown flag --%s before the command (a command's own flags go after it; see \"lockkit help\")", flagName)}
		}
		rest = append(rest, a)
		if !hasValue && !isBool(f) {
			if i+1 == len(args) {
				return "", nil, help, usageError{error: fmt.Errorf("flag --%s needs an argument", flagName)}
			}
			i++
			rest = append(rest, args[i])
		}
	}
	return "", rest, help, nil
}

// parse parses flags placed before or after the positional arguments, and checks their number.
// Everything after "--" is an argument.
func parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{error: errors.New(flagMessage(err.Error()))}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < min || len(pos) > max {
		want := fmt.Sprintf("%d to %d", min, max)
		switch {
		case min == max:
			want = fmt.Sprint(min)
		case min == 0:
			want = fmt.Sprintf("at most %d", max)
		}
		return nil, usageError{error: fmt.Errorf("want %s argument(s), got %d: lockkit %s", want, len(pos), synopsis(fs.Name()))}
	}
	return pos, nil
}

// synopsis returns "NAME ARGS" of a command.
func synopsis(name string) string {
	c, _ := lookup(name)
	return strings.TrimSpace(c.name + " " + c.args)
}

// flagDash spells the package flag's single-dash flag names as the help does: --name.
var flagDash = regexp.MustCompile(`(^|\s)-([a-z])`)

// flagMessage rewrites an error of package flag into the help's terms.
func flagMessage(msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	return strings.ReplaceAll(flagDash.ReplaceAllString(msg, "$1--$2"), "flag --o:", "flag -o:")
}

// open connects as the flags say and returns a core.Client over the connection (which sends only
// what its methods need), the connection, and a function that closes both.
func (e *env) open() (*core.Client, redis.UniversalClient, func(), error) {
	rdb, err := e.client(e.errOut)
	if err != nil {
		return nil, nil, nil, err
	}
	locks, err := core.New(rdb, core.WithPrefix(e.prefix))
	if err != nil {
		rdb.Close()
		return nil, nil, nil, usageError{error: err}
	}
	return locks, rdb, func() {
		_ = locks.Close(context.Background())
		_ = rdb.Close()
	}, nil
}

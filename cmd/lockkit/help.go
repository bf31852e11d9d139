package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one of lockkit's commands: what "lockkit help" says about it, how many arguments it
// takes, and its own flags and body.
type command struct {
	name     string
	args     string // the arguments, as the synopsis shows them
	summary  string // one line for the list of commands
	about    string // what "lockkit help NAME" says, paragraphs separated by blank lines
	examples []string
	min, max int // number of arguments
	// setup registers the command's own flags on fs and returns its body, which runs once they
	// are parsed.
	setup func(fs *flag.FlagSet) runner
}

// runner runs a command with its arguments.
type runner func(ctx context.Context, e *env, args []string) error

// env is what a command works with: the parsed connection flags and the standard streams.
type env struct {
	conn
	in          io.Reader
	out, errOut io.Writer
}

// commands returns lockkit's commands, in the order "lockkit help" lists them.
func commands() []command {
	return []command{
		{name: "ls", args: "[PATTERN]", max: 1, setup: setupLs,
			summary: "list the held names that match PATTERN (a glob, default *), every holder",
			about: `List the held names that match the glob PATTERN (default *), one line per holder, whatever
holds the name: NAME; MODE, the holder's mode: "lock", "write" or "read" (core.Read, core.Write),
or "permit/N" for a permit of a semaphore whose limit is N (core.Permits); HOLDER, the digest of
its owner token, host/pid and label; HELD FOR; TTL, what remains of its lease; FENCE, its fencing
token; QUEUED, the waiters queued in Redis for the name (a lock's fair waiters, core.Fair; every
permit waiter; every reader and writer waiting); WAITING, the processes waiting for it, fair or
not: those subscribed to its release channels (PUBSUB NUMSUB), so a process counts once however
many of its calls wait, and for 3 s after its last one ended ("lockkit watch" processes are not
counted). On a cluster it scans every master.

Keys that match the pattern but are not lockkit locks are skipped, each with a warning on stderr.`,
			examples: []string{"lockkit ls", "lockkit ls 'invoice:*' --json", "lockkit ls '@http-idem/*'"}},
		{name: "inspect", args: "NAME", min: 1, max: 1, setup: setupInspect,
			summary: "who holds NAME, in which mode, since when, TTL, fence, waiters",
			about: `Show whether NAME is held and in which mode ("lock", "write", "read", "permit/N"), then every
holder, each with its mode, the digest of its owner token, host, pid, label, since when by the
Redis clock, hold count, TTL and fence; then the name's TTL and fence and the waiters queued in
Redis (fair waiters; permit waiters and read-write waiters when there are any, or the name is held
in that mode) and the processes waiting for it, fair or not (subscribed to its release channels,
as ls's WAITING counts them).
A lock taken in a namespace is named @NAMESPACE/NAME (cronlock's job "report": @cron/report;
httpmw's KeyLock of the key 42: @http/42). When NAME is free but @NAMESPACE/NAME is held, a hint
on stderr names it.

Exit code 3 when nothing holds NAME (the last fence is shown).`,
			examples: []string{"lockkit inspect invoice:42", "lockkit inspect @cron/report --json"}},
		{name: "release", args: "--force NAME", min: 1, max: 1, setup: setupRelease,
			summary: "end a stuck hold: delete NAME's lock and permits, wake the waiters",
			about: `Delete every hold of NAME, whoever holds it and in whichever mode (the lock, every permit of
the semaphore, every read and write hold), and wake the next waiter (one permit or read-write
waiter per freed hold). It shows the holders (mode, owner, held for, fence) and asks for
confirmation on stdin unless --yes. The holders learn it at their next renewal (their context
is cancelled, cause "lost (not_owner)"); until then their work may go on.

Exit code 3 when nothing was held, 4 when not confirmed.`,
			examples: []string{"lockkit release --force invoice:42", "lockkit release --force --yes @cron/report"}},
		{name: "watch", args: "NAME", min: 1, max: 1, setup: setupWatch,
			summary: "print NAME's acquisitions, handoffs, releases, expiries, waiters as they happen",
			about: `Print what happens to NAME, one line per event, until --for has passed or it is interrupted
(exit code 0). An event about a holder shows its mode, fence and owner (and TTL when it starts):
state (what it found first: one line per holder, or "free", with the waiters as "waiting" shows
them; JSON "free": true when free), acquired (a new holder), handoff (a
new holder as another one's hold ended), released (a holder released its hold: the lock's key
was left free, the hold ended before its lease ran out, or a release message said so),
force-released (lockkit release --force, Client.ForceRelease), expired (a hold that ended at
the end of its lease without a release: its holder died or stopped renewing), free (nothing
holds it any more; JSON "free": true), and waiting (a change in the waiters queued in Redis or in
the processes subscribed to its release channels, fair or not: waiting, or waited in the last 3 s;
other watches of the name are not counted).`,
			examples: []string{"lockkit watch --for 1m report:daily", "lockkit watch invoice:42 --json"}},
		{name: "idem", args: "SCOPE KEY", min: 2, max: 2, setup: setupIdem,
			summary: "an adapter's idempotency record: stored, in progress, or none",
			about: `Read the idempotency record PREFIXidem:{@SCOPE/HASH} of the exactly-once layer (httpmw,
grpcmw). SCOPE is the adapter's namespace (http-idem, grpc-idem; a SCOPE starting with @ is used
as it is). The adapters name a record by the hash of the request's scope and the client's key:

  - for httpmw, give the request and KEY is the client's Idempotency-Key (unquoted): --method and
    --route (the ServeMux pattern, "POST /orders/{id}", or the path outside one), and the caller
    as httpmw scoped it: --header 'Authorization: …' and --header 'Cookie: …' as sent (none for
    an anonymous request), --cert for a client certificate, or --principal for WithScope;
  - otherwise KEY is the hash, as "lockkit ls '@http-idem/*'" shows it for a request in flight.

It says whether an outcome is stored (its kind, age from --retention, TTL; the stored value only
with --body), in progress (its lock is held), or none (exit code 3).`,
			examples: []string{"lockkit idem http-idem KEY", "lockkit idem --body --json http-idem KEY",
				"lockkit idem http-idem order-1 --method POST --route /orders"}},
		{name: "doctor", setup: setupDoctor,
			summary:  "check a deployment for what lockkit needs: ok, warn or unsafe, and the fix",
			about:    doctorAbout,
			examples: []string{"lockkit doctor", "lockkit doctor --ttl 30s -o json"}},
		{name: "version", setup: setupVersion,
			summary: "the command's version, VCS commit and Go version",
			about: `Print the module version lockkit was built from, the VCS commit and whether the tree had
uncommitted changes, and the Go version, as the binary records them (runtime/debug.ReadBuildInfo,
what "go version -m" shows). go install records the version; a build from a checkout records
the commit and a pseudo-version (in a go.work workspace only with go build -buildvcs=true;
without, the version is "(devel)"). It reaches no server.`,
			examples: []string{"lockkit version", "lockkit version --json"}},
		{name: "help", args: "[COMMAND]", max: 1,
			summary: "this text, or a command's",
			about:   `Show the commands and the flags, or what a command does, its arguments and flags.`,
			setup: func(*flag.FlagSet) runner {
				return func(_ context.Context, e *env, args []string) error {
					if len(args) == 0 {
						writeHelp(e.out)
						return nil
					}
					cmd, ok := lookup(args[0])
					if !ok {
						return unknownCommand(args[0])
					}
					writeCommandHelp(e.out, cmd)
					return nil
				}
			}},
	}
}

// lookup finds a command by name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

const exitCodes = `Exit codes:
  0  done (inspect: NAME is held)
  1  Redis unreachable, or a command failed
  2  usage error
  3  nothing there: inspect found NAME free, release found nothing held, idem
     found no record
  4  release not confirmed
  5  doctor: a check found the deployment unsafe
`

// writeHelp writes lockkit's help: the commands, the flags every command takes, the exit codes.
func writeHelp(w io.Writer) {
	fmt.Fprint(w, "lockkit — inspect and operate lockkit's locks in Redis\n\n")
	fmt.Fprint(w, "Usage: lockkit COMMAND [ARGUMENTS] [FLAGS]   (flags may also come before COMMAND)\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-22s %s\n", c.name+" "+c.args, c.summary)
	}
	fmt.Fprint(w, "\nFlags (every command; before or after the command and its arguments):\n")
	writeFlags(w, globalFlags(), globalOrder...)
	fmt.Fprint(w, "\n"+exitCodes)
	fmt.Fprint(w, `
Holders are shown by the first 12 hex digits of the SHA-256 of their owner token, never the token.
Durations are written as Go writes them, to the millisecond (1h2m3.5s, 8.7s, 446ms); JSON gives
them in milliseconds (*_ms). Redis commands used (for an ACL): docs/security.md. Run
"lockkit help COMMAND" or "lockkit COMMAND -h" for a command's arguments, flags and examples.
`)
}

// writeCommandHelp writes what "lockkit help NAME" and "lockkit NAME -h" say.
func writeCommandHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "Usage: lockkit %s [FLAGS]\n\n%s\n", strings.TrimSpace(c.name+" "+c.args), c.about)
	if len(c.examples) > 0 {
		fmt.Fprint(w, "\nExamples:\n")
		for _, ex := range c.examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
	own := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if c.setup != nil {
		c.setup(own)
	}
	if c.name == "help" {
		return
	}
	n := 0
	own.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		writeFlags(w, own)
	}
	fmt.Fprint(w, "\nFlags of every command (before or after the command and its arguments):\n")
	writeFlags(w, globalFlags(), globalOrder...)
	fmt.Fprint(w, "\n"+exitCodes)
}

// globalFlags returns a flag set holding the flags every command takes.
func globalFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("lockkit", flag.ContinueOnError)
	new(conn).register(fs)
	return fs
}

// writeFlags lists the flags of fs, their argument, what they do and their default: those named
// in order first, in that order, then the others.
func writeFlags(w io.Writer, fs *flag.FlagSet, order ...string) {
	var flags []*flag.Flag
	for _, name := range order {
		if f := fs.Lookup(name); f != nil {
			flags = append(flags, f)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(order, f.Name) {
			flags = append(flags, f)
		}
	})
	for _, f := range flags {
		if f.Name == "o" {
			continue // --output's short name, said in its usage
		}
		arg, usage := flag.UnquoteUsage(f)
		if isBool(f) {
			arg = ""
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0s" && d != "[]" {
			usage += " (default " + d + ")"
		}
		left := strings.TrimSpace("--" + f.Name + " " + arg)
		lines := wrap(usage, 78)
		fmt.Fprintf(w, "  %-19s %s\n", left, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "  %-19s %s\n", "", l)
		}
	}
}

// isBool reports whether f is a flag that takes no argument.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// unknownCommand is the usage error of a command that does not exist: the command it most likely
// meant, if one is close, then the list of commands.
func unknownCommand(name string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command %q; ", name)
	if s := suggestCommand(name); s != "" {
		fmt.Fprintf(&b, "did you mean \"lockkit %s\"? ", s)
	}
	b.WriteString("the commands are:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-22s %s\n", c.name+" "+c.args, c.summary)
	}
	return usageError{error: errors.New(strings.TrimSuffix(b.String(), "\n")), listed: true}
}

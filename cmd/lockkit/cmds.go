package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

func setupLs(*flag.FlagSet) runner { return cmdLs }

// cmdLs lists the held names that match a pattern, whatever holds them (a lock, a write, reads,
// permits), on every master of a cluster. A key that matches but is not a lockkit lock is skipped
// with a warning.
func cmdLs(ctx context.Context, e *env, args []string) error {
	pattern := "*"
	if len(args) == 1 {
		pattern = args[0]
	}
	locks, rdb, closeAll, err := e.open()
	if err != nil {
		return err
	}
	defer closeAll()
	keys, err := scanNames(ctx, rdb, e.prefix, pattern)
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	var (
		infos []core.LockInfo
		subs  []int
	)
	counted := true
	for _, name := range names {
		info, err := locks.Inspect(ctx, name)
		if why, skip := notALock(err); skip {
			fmt.Fprintf(e.errOut, "lockkit ls: skipped %q: not a lockkit lock (%s)\n", keys[name], why)
			continue
		}
		if err != nil {
			return err
		}
		if !info.Held {
			continue
		}
		n := -1
		if counted {
			n = waitingProcesses(ctx, e, rdb, name)
			counted = n >= 0
		}
		infos, subs = append(infos, info), append(subs, n)
	}
	if e.json {
		for k, i := range infos {
			if err := printJSON(e.out, toJSON(i, subs[k])); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODE\tHOLDER\tHELD FOR\tTTL\tFENCE\tQUEUED\tWAITING")
	for k, i := range infos {
		waiting := "?"
		if subs[k] >= 0 {
			waiting = strconv.Itoa(subs[k])
		}
		for _, h := range i.Holders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", i.Name, modeText(h.Mode, i.Limit), who(h), dur(h.HeldFor), dur(h.TTL), h.Fence, queued(i), waiting)
		}
	}
	return tw.Flush()
}

// scanNames finds the names whose keys match the glob pattern (on every master of a cluster) and
// returns, for each, a key it was found by. A lock is a string PREFIX{NAME}, a semaphore a sorted
// set PREFIX{NAME}:permits, a read-write lock a sorted set PREFIX{NAME}:rw (docs/keys.md).
func scanNames(ctx context.Context, rdb redis.UniversalClient, prefix, pattern string) (map[string]string, error) {
	match := globEscape(prefix) + "{" + pattern + "}"
	var (
		mu   sync.Mutex
		keys = map[string]string{} // name -> a key it was found by
	)
	scan := func(ctx context.Context, r redis.Cmdable) error {
		for _, kind := range [][2]string{{"", "string"}, {":permits", "zset"}, {":rw", "zset"}} {
			it := r.ScanType(ctx, 0, match+kind[0], 1000, kind[1]).Iterator()
			for it.Next(ctx) {
				name := strings.TrimSuffix(strings.TrimPrefix(it.Val(), prefix+"{"), "}"+kind[0])
				mu.Lock()
				if _, ok := keys[name]; !ok {
					keys[name] = it.Val()
				}
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	return keys, err
}

// notALock reports whether Inspect failed because the key it read is not a lockkit lock (and
// why), rather than because Redis could not be asked: its name cannot be a lock's, its value is
// not a lock's, or a key of its family has another type.
//
// core does not export the error of a value that is not a lock's (errInspectReply): it is
// recognized by its text, which TestLs_skipsKeysThatAreNotLocks pins.
func notALock(err error) (string, bool) {
	var rerr redis.Error
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, core.ErrInvalid):
		return "its name is not a lock name", true
	case errors.Is(err, core.ErrUnavailable) && errors.Unwrap(err) != nil && errors.Unwrap(err).Error() == "unexpected inspect reply":
		return "its value is not a lock's", true
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE"):
		return "a key of its name has another type", true
	}
	return "", false
}

// globEscape escapes the glob characters of SCAN's MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func setupInspect(*flag.FlagSet) runner { return cmdInspect }

// cmdInspect prints what Redis holds about a name: its mode and every holder; exit code 3 when
// nothing holds it. A free name without a namespace whose namesake in a namespace is held
// (httpmw's KeyLock holds @http/42, not 42) gets a hint on stderr.
func cmdInspect(ctx context.Context, e *env, args []string) error {
	locks, rdb, closeAll, err := e.open()
	if err != nil {
		return err
	}
	defer closeAll()
	info, err := locks.Inspect(ctx, args[0])
	if errors.Is(err, core.ErrInvalid) {
		return usageError{error: err}
	}
	if err != nil {
		return err
	}
	subs := waitingProcesses(ctx, e, rdb, args[0])
	if e.json {
		err = printJSON(e.out, toJSON(info, subs))
	} else {
		err = printInfo(e.out, info, subs)
	}
	if err != nil {
		return err
	}
	if !info.Held {
		if held := namesakes(ctx, locks, rdb, e.prefix, args[0]); len(held) > 0 {
			fmt.Fprintf(e.errOut, "lockkit inspect: %s is free; did you mean %s? (held in a namespace: lockkit inspect %s)\n",
				args[0], strings.Join(held, " or "), held[0])
		}
		return errNotFound
	}
	return nil
}

// namesakes returns the held names @NAMESPACE/name, for a name without a namespace: the names an
// adapter gives a key it locks (docs/keys.md, "Namespaces"). It is a hint: an error (a user
// without +scan, say) finds none.
func namesakes(ctx context.Context, locks *core.Client, rdb redis.UniversalClient, prefix, name string) []string {
	if strings.HasPrefix(name, "@") {
		return nil
	}
	keys, err := scanNames(ctx, rdb, prefix, "@*/"+globEscape(name))
	if err != nil {
		return nil
	}
	var held []string
	for n := range keys {
		ns, rest, _ := strings.Cut(n[1:], "/")
		if rest != name || !isNamespace(ns) {
			continue // @a/b/NAME: the name b/NAME in namespace a
		}
		if info, err := locks.Inspect(ctx, n); err == nil && info.Held {
			held = append(held, n)
		}
	}
	sort.Strings(held)
	return held
}

// released is release's JSON output.
type released struct {
	Name     string    `json:"name"`
	Released bool      `json:"released"`
	Was      *jsonLock `json:"was,omitempty"` // what was held, as inspect shows it
}

func setupRelease(fs *flag.FlagSet) runner {
	force := fs.Bool("force", false, "required: release a lock this command does not hold")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	return func(ctx context.Context, e *env, args []string) error {
		if !*force {
			return usageError{error: fmt.Errorf("--force is required: this deletes a lock somebody else holds; to do so: lockkit release --force %s", args[0])}
		}
		return cmdRelease(ctx, e, args[0], *yes)
	}
}

// cmdRelease force-releases a lock after confirmation.
func cmdRelease(ctx context.Context, e *env, name string, yes bool) error {
	locks, _, closeAll, err := e.open()
	if err != nil {
		return err
	}
	defer closeAll()
	info, err := locks.Inspect(ctx, name)
	if errors.Is(err, core.ErrInvalid) {
		return usageError{error: err}
	}
	if err != nil {
		return err
	}
	if !info.Held {
		return notHeld(e, name, "")
	}
	var desc []string
	for _, h := range info.Holders {
		desc = append(desc, fmt.Sprintf("%s held by %s for %s, fence %d", modeText(h.Mode, info.Limit), who(h), dur(h.HeldFor), h.Fence))
	}
	if !yes {
		fmt.Fprintf(e.errOut, "Release %s (%s)?\nThe holders learn it at their next renewal; until then their work may go on. [y/N] ", name, strings.Join(desc, "; "))
		line, _ := bufio.NewReader(e.in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errAborted
		}
	}
	ok, err := locks.ForceRelease(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return notHeld(e, name, " (released meanwhile)")
	}
	if e.json {
		was := toJSON(info, -1)
		return printJSON(e.out, released{Name: name, Released: true, Was: &was})
	}
	fmt.Fprintf(e.out, "released %s (was %s)\n", name, strings.Join(desc, "; "))
	return nil
}

// notHeld reports a release that found nothing to release: exit code 3.
func notHeld(e *env, name, why string) error {
	if e.json {
		if err := printJSON(e.out, released{Name: name}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.out, "%s is not held%s\n", name, why)
	}
	return errNotFound
}

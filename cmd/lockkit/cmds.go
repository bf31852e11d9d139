package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

type jsonHolder struct {
	Digest    string     `json:"digest"`
	Holds     int64      `json:"holds"`
	Acquired  *time.Time `json:"acquired,omitempty"`
	HeldForMS int64      `json:"held_for_ms"`
	TTLMS     int64      `json:"ttl_ms"`
	Fence     int64      `json:"fence"`
	Host      string     `json:"host,omitempty"`
	PID       int        `json:"pid,omitempty"`
	Label     string     `json:"label,omitempty"`
}

type jsonLock struct {
	Name    string       `json:"name"`
	Key     string       `json:"key"`
	Held    bool         `json:"held"`
	Holders []jsonHolder `json:"holders"`
	TTLMS   int64        `json:"ttl_ms"`
	Fence   int64        `json:"fence"`
	Queued  int          `json:"queued"`
	// The semaphore of the same name (core.Permits): its live permits, limit and fair waiters.
	Permits       []jsonHolder `json:"permits"`
	Limit         int          `json:"limit"`
	PermitsQueued int          `json:"permits_queued"`
}

func toJSON(info core.LockInfo) jsonLock {
	j := jsonLock{Name: info.Name, Key: info.Key, Held: info.Held, Holders: []jsonHolder{}, TTLMS: info.TTL.Milliseconds(),
		Fence: info.Fence, Queued: info.Queued, Permits: []jsonHolder{}, Limit: info.Limit, PermitsQueued: info.PermitsQueued}
	for _, h := range info.Holders {
		j.Holders = append(j.Holders, holderJSON(h))
	}
	for _, h := range info.Permits {
		j.Permits = append(j.Permits, holderJSON(h))
	}
	return j
}

func holderJSON(h core.HolderInfo) jsonHolder {
	j := jsonHolder{Digest: h.Digest, Holds: h.Holds, HeldForMS: h.HeldFor.Milliseconds(), TTLMS: h.TTL.Milliseconds(),
		Fence: h.Fence, Host: h.Host, PID: h.PID, Label: h.Label}
	if !h.Acquired.IsZero() {
		at := h.Acquired.UTC()
		j.Acquired = &at
	}
	return j
}

// inUse reports whether a name's lock or any permit of its semaphore is held.
func inUse(info core.LockInfo) bool { return info.Held || len(info.Permits) > 0 }

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }

// who describes a holder in one line: "DIGEST host/pid label".
func who(h core.HolderInfo) string {
	s := h.Digest
	if h.Host != "" {
		s += fmt.Sprintf(" %s/%d", h.Host, h.PID)
	}
	if h.Label != "" {
		s += " " + h.Label
	}
	return s
}

// cmdLs lists the held locks and semaphore permits whose names match a pattern, on every master of
// a cluster.
func cmdLs(ctx context.Context, args []string, out io.Writer) error {
	var c conn
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	c.register(fs, true)
	pos, err := parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	pattern := "*"
	if len(pos) == 1 {
		pattern = pos[0]
	}
	locks, rdb, closeAll, err := c.open()
	if err != nil {
		return err
	}
	defer closeAll()
	match := globEscape(c.prefix) + "{" + pattern + "}"
	var (
		mu    sync.Mutex
		names = map[string]bool{}
	)
	// A lock is a string PREFIX{NAME}, a semaphore a sorted set PREFIX{NAME}:permits.
	scan := func(ctx context.Context, r redis.Cmdable) error {
		for _, kind := range [][2]string{{"", "string"}, {":permits", "zset"}} {
			it := r.ScanType(ctx, 0, match+kind[0], 1000, kind[1]).Iterator()
			for it.Next(ctx) {
				name := strings.TrimSuffix(strings.TrimPrefix(it.Val(), c.prefix+"{"), "}"+kind[0])
				mu.Lock()
				names[name] = true
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var infos []core.LockInfo
	for _, name := range sorted {
		info, err := locks.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if inUse(info) {
			infos = append(infos, info)
		}
	}
	if c.json {
		all := []jsonLock{}
		for _, i := range infos {
			all = append(all, toJSON(i))
		}
		return printJSON(out, all)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDER\tHELD FOR\tTTL\tFENCE\tQUEUED")
	for _, i := range infos {
		for _, h := range i.Holders {
			fmt.Fprintf(tw, "%s\tlock\t%s\t%s\t%s\t%d\t%d\n", i.Name, who(h), dur(h.HeldFor), dur(h.TTL), h.Fence, i.Queued)
		}
		for _, h := range i.Permits {
			fmt.Fprintf(tw, "%s\tpermit/%d\t%s\t%s\t%s\t%d\t%d\n", i.Name, i.Limit, who(h), dur(h.HeldFor), dur(h.TTL), h.Fence, i.PermitsQueued)
		}
	}
	return tw.Flush()
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

func printInfo(out io.Writer, info core.LockInfo) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "lock\t%s\n", info.Name)
	fmt.Fprintf(tw, "key\t%s\n", info.Key)
	if !info.Held {
		fmt.Fprintf(tw, "held\tno\n")
		fmt.Fprintf(tw, "last fence\t%d\n", info.Fence)
	} else {
		fmt.Fprintf(tw, "held\tyes\n")
		for _, h := range info.Holders {
			printHolder(tw, "holder", h)
			fmt.Fprintf(tw, "  holds\t%d\n", h.Holds)
		}
		fmt.Fprintf(tw, "ttl\t%s\n", dur(info.TTL))
		fmt.Fprintf(tw, "fence\t%d\n", info.Fence)
	}
	fmt.Fprintf(tw, "fair waiters\t%d\n", info.Queued)
	if len(info.Permits) > 0 || info.PermitsQueued > 0 {
		fmt.Fprintf(tw, "permits\t%d held of %d\n", len(info.Permits), info.Limit)
		for _, h := range info.Permits {
			printHolder(tw, "permit", h)
			fmt.Fprintf(tw, "  ttl\t%s\n  fence\t%d\n", dur(h.TTL), h.Fence)
		}
		fmt.Fprintf(tw, "fair permit waiters\t%d\n", info.PermitsQueued)
	}
	return tw.Flush()
}

func printHolder(tw io.Writer, kind string, h core.HolderInfo) {
	fmt.Fprintf(tw, "%s\t%s\n", kind, h.Digest)
	if h.Host != "" {
		fmt.Fprintf(tw, "  host\t%s\n  pid\t%d\n", h.Host, h.PID)
	}
	if h.Label != "" {
		fmt.Fprintf(tw, "  label\t%s\n", h.Label)
	}
	if !h.Acquired.IsZero() {
		fmt.Fprintf(tw, "  since\t%s (%s ago, by the Redis clock)\n", h.Acquired.UTC().Format(time.RFC3339Nano), dur(h.HeldFor))
	}
}

// cmdInspect prints what Redis holds about a lock and its semaphore; exit code 3 when neither is
// held.
func cmdInspect(ctx context.Context, args []string, out io.Writer) error {
	var c conn
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	c.register(fs, true)
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	locks, _, closeAll, err := c.open()
	if err != nil {
		return err
	}
	defer closeAll()
	info, err := locks.Inspect(ctx, pos[0])
	if errors.Is(err, core.ErrInvalid) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	if c.json {
		err = printJSON(out, toJSON(info))
	} else {
		err = printInfo(out, info)
	}
	if err == nil && !inUse(info) {
		return errNotFound
	}
	return err
}

// cmdRelease force-releases a lock after confirmation.
func cmdRelease(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) error {
	var c conn
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	c.register(fs, false)
	force := fs.Bool("force", false, "required: release a lock this command does not hold")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if !*force {
		return usageError{errors.New("--force is required: this deletes a lock somebody else holds")}
	}
	locks, _, closeAll, err := c.open()
	if err != nil {
		return err
	}
	defer closeAll()
	name := pos[0]
	info, err := locks.Inspect(ctx, name)
	if errors.Is(err, core.ErrInvalid) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	if !inUse(info) {
		fmt.Fprintf(out, "%s is not held\n", name)
		return errNotFound
	}
	var desc []string
	for _, h := range info.Holders {
		desc = append(desc, fmt.Sprintf("held by %s for %s, fence %d", who(h), dur(h.HeldFor), info.Fence))
	}
	if n := len(info.Permits); n > 0 {
		desc = append(desc, fmt.Sprintf("%d of %d permits held, oldest by %s", n, info.Limit, who(oldest(info.Permits))))
	}
	if !*yes {
		fmt.Fprintf(errOut, "Release %s (%s)?\nThe holders learn it at their next renewal; until then their work may go on. [y/N] ", name, strings.Join(desc, "; "))
		line, _ := bufio.NewReader(in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errAborted
		}
	}
	ok, err := locks.ForceRelease(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(out, "%s is not held (released meanwhile)\n", name)
		return errNotFound
	}
	fmt.Fprintf(out, "released %s (was %s)\n", name, strings.Join(desc, "; "))
	return nil
}

// oldest returns the holder that has held the longest.
func oldest(hs []core.HolderInfo) core.HolderInfo {
	o := hs[0]
	for _, h := range hs[1:] {
		if h.HeldFor > o.HeldFor {
			o = h
		}
	}
	return o
}

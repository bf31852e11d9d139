package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lockkit/lockkit/core"
)

// How a name and its holders are shown, the same way by ls, inspect and watch: the name's mode
// and, for every holder, its mode, owner (who), fence and TTL; durations as dur writes them.

// jsonHolder is a holder in JSON output (ls, inspect, release, watch).
type jsonHolder struct {
	Mode      string     `json:"mode"` // lock, write, read, permit
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

// jsonLock is a name in JSON output (ls, inspect; release's "was").
type jsonLock struct {
	Name    string       `json:"name"`
	Key     string       `json:"key"`
	Held    bool         `json:"held"`
	Mode    string       `json:"mode"` // lock, write, read, permit; "" when free
	Holders []jsonHolder `json:"holders"`
	TTLMS   int64        `json:"ttl_ms"`
	Fence   int64        `json:"fence"`
	Limit   int          `json:"limit,omitempty"` // the semaphore's, while permits are held
	// The waiters queued in Redis: a lock's fair waiters, permit waiters, read-write waiters.
	Queued        int `json:"queued"`
	PermitsQueued int `json:"permits_queued"`
	RWQueued      int `json:"rw_queued"`
	// The processes subscribed to the name's release channels: every waiter's, fair or not
	// (waiters.go); omitted when they could not be counted.
	Subscribed *int `json:"subscribed_processes,omitempty"`
}

// toJSON converts what Inspect read, with the number of processes subscribed to the name's release
// channels (-1: not counted).
func toJSON(info core.LockInfo, subs int) jsonLock {
	j := jsonLock{Name: info.Name, Key: info.Key, Held: info.Held, Mode: info.Mode, Holders: []jsonHolder{},
		TTLMS: info.TTL.Milliseconds(), Fence: info.Fence, Limit: info.Limit, Queued: info.Queued,
		PermitsQueued: info.PermitsQueued, RWQueued: info.RWQueued}
	for _, h := range info.Holders {
		j.Holders = append(j.Holders, holderJSON(h))
	}
	if subs >= 0 {
		j.Subscribed = &subs
	}
	return j
}

func holderJSON(h core.HolderInfo) jsonHolder {
	j := jsonHolder{Mode: h.Mode, Digest: h.Digest, Holds: h.Holds, HeldForMS: h.HeldFor.Milliseconds(),
		TTLMS: h.TTL.Milliseconds(), Fence: h.Fence, Host: h.Host, PID: h.PID, Label: h.Label}
	if !h.Acquired.IsZero() {
		at := h.Acquired.UTC()
		j.Acquired = &at
	}
	return j
}

// queued is the number of waiters queued in Redis for the name, whatever they wait for.
func queued(info core.LockInfo) int { return info.Queued + info.PermitsQueued + info.RWQueued }

// modeText is a mode as the text output shows it: lock, write, read, or permit/N for a permit of a
// semaphore whose limit is N.
func modeText(mode string, limit int) string {
	if mode == "permit" && limit > 0 {
		return fmt.Sprintf("permit/%d", limit)
	}
	return mode
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// dur is how the text output writes every duration: Go's, rounded to the millisecond (1h2m3.5s,
// 8.7s, 446ms). JSON writes milliseconds (*_ms fields).
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

// holderLine describes a holder in one line, as watch and release show it:
// "mode=MODE fence=F holder=DIGEST host/pid label", then " ttl=T" when withTTL.
func holderLine(h core.HolderInfo, limit int, withTTL bool) string {
	s := fmt.Sprintf("mode=%s fence=%d holder=%s", modeText(h.Mode, limit), h.Fence, who(h))
	if withTTL {
		s += " ttl=" + dur(h.TTL)
	}
	return s
}

// printInfo writes inspect's text: the name, whether it is held and in which mode, every holder
// with its mode, TTL and fence, the waiters queued in Redis, and the processes subscribed to its
// release channels (subs; -1: not counted).
func printInfo(out io.Writer, info core.LockInfo, subs int) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "lock\t%s\n", info.Name)
	fmt.Fprintf(tw, "key\t%s\n", info.Key)
	if !info.Held {
		fmt.Fprintf(tw, "held\tno\n")
		fmt.Fprintf(tw, "last fence\t%d\n", info.Fence)
	} else {
		fmt.Fprintf(tw, "held\tyes\n")
		fmt.Fprintf(tw, "mode\t%s\n", modeText(info.Mode, info.Limit))
		for _, h := range info.Holders {
			fmt.Fprintf(tw, "holder\t%s\n", h.Digest)
			fmt.Fprintf(tw, "  mode\t%s\n", modeText(h.Mode, info.Limit))
			if h.Host != "" {
				fmt.Fprintf(tw, "  host\t%s\n  pid\t%d\n", h.Host, h.PID)
			}
			if h.Label != "" {
				fmt.Fprintf(tw, "  label\t%s\n", h.Label)
			}
			if !h.Acquired.IsZero() {
				fmt.Fprintf(tw, "  since\t%s (%s ago, by the Redis clock)\n", h.Acquired.UTC().Format(time.RFC3339Nano), dur(h.HeldFor))
			}
			fmt.Fprintf(tw, "  holds\t%d\n  ttl\t%s\n  fence\t%d\n", h.Holds, dur(h.TTL), h.Fence)
		}
		fmt.Fprintf(tw, "ttl\t%s\n", dur(info.TTL))
		fmt.Fprintf(tw, "fence\t%d\n", info.Fence)
	}
	fmt.Fprintf(tw, "fair waiters\t%d\n", info.Queued)
	if info.PermitsQueued > 0 || info.Mode == "permit" {
		fmt.Fprintf(tw, "permit waiters\t%d\n", info.PermitsQueued)
	}
	if info.RWQueued > 0 || info.Mode == "read" || info.Mode == "write" {
		fmt.Fprintf(tw, "read-write waiters\t%d\n", info.RWQueued)
	}
	if subs >= 0 {
		fmt.Fprintf(tw, "waiting processes\t%d (subscribed to its release channels: waiting, fair or not, or within the last 3 s)\n", subs)
	}
	return tw.Flush()
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lockkit/lockkit/core"
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
	// The read-write lock of the same name (core.Read, core.Write): its readers, its writer and its
	// queued waiters (left out when there are none).
	Readers  []jsonHolder `json:"readers,omitempty"`
	Writer   *jsonHolder  `json:"writer,omitempty"`
	RWQueued int          `json:"rw_queued,omitempty"`
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
	for _, h := range info.Readers {
		j.Readers = append(j.Readers, holderJSON(h))
	}
	if info.Writer != nil {
		w := holderJSON(*info.Writer)
		j.Writer = &w
	}
	j.RWQueued = info.RWQueued
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

// inUse reports whether a name's lock, any permit of its semaphore or its read-write lock is held.
func inUse(info core.LockInfo) bool {
	return info.Held || len(info.Permits) > 0 || len(info.Readers) > 0 || info.Writer != nil
}

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
		fmt.Fprintf(tw, "permit waiters\t%d\n", info.PermitsQueued)
	}
	if hs := rwHolders(info); len(hs) > 0 || info.RWQueued > 0 {
		fmt.Fprintf(tw, "read-write lock\t%s\n", rwSummary(info))
		for _, h := range hs {
			printHolder(tw, h.mode, h.HolderInfo)
			fmt.Fprintf(tw, "  ttl\t%s\n  fence\t%d\n", dur(h.TTL), h.Fence)
		}
		fmt.Fprintf(tw, "read-write waiters\t%d\n", info.RWQueued)
	}
	return tw.Flush()
}

// rwHolder is a holder of a read-write lock and its side.
type rwHolder struct {
	core.HolderInfo
	mode string // "write" or "read"
}

// rwHolders lists the writer, then the readers of a name's read-write lock.
func rwHolders(info core.LockInfo) []rwHolder {
	var hs []rwHolder
	if info.Writer != nil {
		hs = append(hs, rwHolder{*info.Writer, "write"})
	}
	for _, h := range info.Readers {
		hs = append(hs, rwHolder{h, "read"})
	}
	return hs
}

// rwSummary describes who holds a read-write lock: "written", "N readers" or "free".
func rwSummary(info core.LockInfo) string {
	switch {
	case info.Writer != nil:
		return "written"
	case len(info.Readers) > 0:
		return fmt.Sprintf("%d readers", len(info.Readers))
	}
	return "free"
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

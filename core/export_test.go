package core

import (
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// WaitersParked returns how many waiters of c are waiting for a lock (test hook).
func WaitersParked(c *Client) int {
	return c.room.Parked()
}

// RenewStats returns how many renewal pipelines c sent and how many scripts they carried.
func RenewStats(c *Client) (pipelines, scripts int64) {
	return c.wd.pipelines.Load(), c.wd.scripts.Load()
}

// LockState is what Redis records about a lock, read for tests (see internal/script/lua/lock.lua).
type LockState struct {
	Exists bool   // the key exists (a free lock is kept for a while, with its fence)
	Token  string // the owner's token; empty when free
	Holds  int    // the owner's holds
	Fence  int64  // the current (or, when free, the last) acquisition's fence
}

// Held reports whether somebody holds the lock.
func (s LockState) Held() bool { return s.Token != "" }

// ParseLockState reads a lock key's value (GET); v is "" when the key does not exist.
func ParseLockState(v string) (LockState, bool) {
	if v == "" {
		return LockState{}, true
	}
	token, holds, fence, ok := store.ReadValue(v)
	if !ok {
		return LockState{}, false
	}
	return LockState{Exists: true, Token: token, Holds: len(holds), Fence: fence}, true
}

// Outcome is what WaitInfo.Outcome reports for an acquire call that returned err.
func Outcome(err error) string { return outcome(err) }

// StoreKeys returns the keys core computes for the lock, the semaphore and the read-write lock
// name under the default prefix (store.Keys).
func StoreKeys(name string) []string {
	var l, s, rw store.Keys
	l.Init("lockkit:", name)
	s.InitSem("lockkit:", name, 2)
	rw.InitRW(l.Main, name, 1)
	return []string{l.Main, l.Channel, l.Queue, l.Deadlines, s.Main, s.Channel, s.Queue, s.Deadlines,
		s.Sem.Limits, s.Sem.Fences, s.Sem.Receipt, rw.Main, rw.Channel, rw.Queue, rw.Deadlines,
		rw.Sem.Limits, rw.Sem.Fences, rw.Sem.Receipt}
}

// ValidUntil returns l's validity deadline as the watchdog last knew it (test hook).
func ValidUntil(l *Lock) time.Time {
	l.c.wd.mu.Lock()
	defer l.c.wd.mu.Unlock()
	if l.entry == nil {
		return time.Time{}
	}
	return l.entry.valid
}

// Guard returns how early c's watchdog does what it keeps, for its timer's lateness (test hook).
func Guard(c *Client) time.Duration { return c.wd.late.ahead() }

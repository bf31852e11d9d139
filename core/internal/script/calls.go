package script

// One typed builder per script. Each struct's fields are the script's KEYS and then its ARGV, in
// the order and under the names its header declares (TestCalls_matchHeaders); string fields are
// keys, `any` fields arguments (boxed once by callers that reuse them). An optional trailing key
// ("") or argument (nil) is left out. docs/keys.md documents the keys.

// LockArg is a call's lock key as an argument: boxed, the holder's boxed copy of lock when it keeps
// one (a string boxed into an interface is an allocation: a lock's acquire and release then share
// the one its Keys made), else lock boxed for this call.
func LockArg(lock string, boxed any) any {
	if boxed != nil {
		return boxed
	}
	return lock
}

// Acquire calls acquire.lua: take a lock, re-enter it, or say how long it stays taken.
type Acquire struct {
	Lock, Guard                                    string
	Token, TTL, Label, Waiting, Hold, Floor, Entry any
	LockArg                                        any `script:"-"` // Lock boxed once by its holder (see LockArg)
}

// Call builds the call.
func (a *Acquire) Call() Call { return a.CallIn(nil) }

// CallIn builds the call in line's room, when it is free (see Line).
func (a *Acquire) CallIn(line *Line) Call {
	c := Scripts().Acquire.callIn(line, 1, 9)
	c.argv = append(c.argv, LockArg(a.Lock, a.LockArg))
	if a.Guard != "" {
		c.argv = append(c.argv, a.Guard)
		c.argv[2] = 2
	}
	c.argv = append(c.argv, a.Token, a.TTL, a.Label)
	// The trailing defaults are left out (the script reads them as nil): no entry, no floor (nil
	// or ""), hold "0", waiting "0" (or nil, ""). Each argument costs Redis a Lua string.
	switch {
	case !absent(a.Entry):
		c.argv = append(c.argv, a.Waiting, a.Hold, a.Floor, a.Entry)
	case !absent(a.Floor):
		c.argv = append(c.argv, a.Waiting, a.Hold, a.Floor)
	case a.Hold != "0":
		c.argv = append(c.argv, a.Waiting, a.Hold)
	case !absent(a.Waiting) && a.Waiting != "0":
		c.argv = append(c.argv, a.Waiting)
	}
	return c
}

// AcquireFair calls acquire_fair.lua: take a lock in fair mode, or queue for it.
type AcquireFair struct {
	Lock, Queue, Deadlines                       string
	Token, TTL, Timeout, Hold, Label, Pub, Entry any
}

// Call builds the call.
func (a *AcquireFair) Call() Call {
	c := Scripts().AcquireFair.call(3, 10)
	c.argv = append(c.argv, a.Lock, a.Queue, a.Deadlines, a.Token, a.TTL, a.Timeout, a.Hold, a.Label, a.Pub)
	c.opt(a.Entry)
	return c
}

// Release calls release.lua: release one hold (and, with Set, write Value there).
type Release struct {
	Lock, Set                                     string
	Token, Fence, Msg, Hold, Pub, Value, ValueTTL any
	LockArg                                       any `script:"-"` // Lock boxed once by its holder (see LockArg)
}

// Call builds the call.
func (a *Release) Call() Call { return a.CallIn(nil) }

// CallIn builds the call in line's room, when it is free (see Line).
func (a *Release) CallIn(line *Line) Call {
	c := Scripts().Release.callIn(line, 1, 9)
	c.argv = append(c.argv, LockArg(a.Lock, a.LockArg))
	if a.Set != "" {
		c.argv = append(c.argv, a.Set)
		c.argv[2] = 2
	}
	c.argv = append(c.argv, a.Token, a.Fence, a.Msg)
	// The trailing defaults are left out (the script reads them as nil): hold "0", pub "PUBLISH".
	// Each argument costs Redis a Lua string.
	switch {
	case a.Set != "":
		c.argv = append(c.argv, a.Hold, a.Pub, a.Value, a.ValueTTL)
	case a.Pub != "PUBLISH":
		c.argv = append(c.argv, a.Hold, a.Pub)
	case a.Hold != "0":
		c.argv = append(c.argv, a.Hold)
	}
	return c
}

// ReleaseFair calls release_fair.lua: release one hold of a fair lock, handing it on.
type ReleaseFair struct {
	Lock, Queue, Deadlines  string
	Token, Pub, Hold, Fence any
}

// Call builds the call.
func (a *ReleaseFair) Call() Call {
	c := Scripts().ReleaseFair.call(3, 7)
	c.argv = append(c.argv, a.Lock, a.Queue, a.Deadlines, a.Token, a.Pub, a.Hold, a.Fence)
	return c
}

// Dequeue calls dequeue.lua: a fair waiter gives up.
type Dequeue struct {
	Lock, Queue, Deadlines                string
	Token, Pub, Hold, TTL, Timeout, Label any
}

// Call builds the call.
func (a *Dequeue) Call() Call {
	c := Scripts().Dequeue.call(3, 9)
	c.argv = append(c.argv, a.Lock, a.Queue, a.Deadlines, a.Token, a.Pub, a.Hold, a.TTL, a.Timeout, a.Label)
	return c
}

// Renew calls renew.lua: renew (or Extend) a lock's acquisition.
type Renew struct {
	Lock              string
	Token, TTL, Fence any
}

// Call builds the call.
func (a *Renew) Call() Call {
	c := Scripts().Renew.call(1, 4)
	c.argv = append(c.argv, a.Lock, a.Token, a.TTL, a.Fence)
	return c
}

// PTTL calls pttl.lua: a lock's remaining TTL, owner-checked.
type PTTL struct {
	Lock         string
	Token, Fence any
}

// Call builds the call.
func (a *PTTL) Call() Call {
	c := Scripts().PTTL.call(1, 3)
	c.argv = append(c.argv, a.Lock, a.Token, a.Fence)
	return c
}

// RaiseFence calls raise_fence.lua: Redlock's fence write-back.
type RaiseFence struct {
	Lock         string
	Fence, Token any
}

// Call builds the call.
func (a *RaiseFence) Call() Call {
	c := Scripts().RaiseFence.call(1, 3)
	c.argv = append(c.argv, a.Lock, a.Fence, a.Token)
	return c
}

// Inspect calls inspect.lua: what Client.Inspect reports. Read-only.
type Inspect struct {
	Lock, Queue, Deadlines, Permits, Limits, Fences, PQueue, PDeadlines string
	RW, RWLimits, RWFences, RWQueue, RWDeadlines                        string
}

// Call builds the call.
func (a *Inspect) Call() Call {
	c := Scripts().Inspect.call(13, 13)
	c.argv = append(c.argv, a.Lock, a.Queue, a.Deadlines, a.Permits, a.Limits, a.Fences, a.PQueue, a.PDeadlines,
		a.RW, a.RWLimits, a.RWFences, a.RWQueue, a.RWDeadlines)
	return c
}

// ForceRelease calls force_release.lua: an operator frees a lock, its semaphore's permits and its
// read-write lock's leases.
type ForceRelease struct {
	Lock, Queue, Deadlines, Permits, Limits, Fences, PQueue, PDeadlines string
	RW, RWLimits, RWFences, RWQueue, RWDeadlines                        string
	Pub, Msg                                                            any
}

// Call builds the call.
func (a *ForceRelease) Call() Call {
	c := Scripts().ForceRelease.call(13, 15)
	c.argv = append(c.argv, a.Lock, a.Queue, a.Deadlines, a.Permits, a.Limits, a.Fences, a.PQueue, a.PDeadlines,
		a.RW, a.RWLimits, a.RWFences, a.RWQueue, a.RWDeadlines, a.Pub, a.Msg)
	return c
}

// SemAcquire calls sem_acquire.lua: take a permit (or a read-write lock's lease), or queue for one.
type SemAcquire struct {
	Permits, Limits, Fences, Lock, Queue, Deadlines string
	Token, TTL, Limit, Label, Timeout, Fair, Pub    any
}

// Call builds the call.
func (a *SemAcquire) Call() Call {
	c := Scripts().SemAcquire.call(6, 13)
	c.argv = append(c.argv, a.Permits, a.Limits, a.Fences, a.Lock, a.Queue, a.Deadlines,
		a.Token, a.TTL, a.Limit, a.Label, a.Timeout, a.Fair, a.Pub)
	return c
}

// SemRelease calls sem_release.lua: release a permit, handing it on.
type SemRelease struct {
	Permits, Limits, Fences, Lock, Queue, Deadlines, Receipt string
	Token, Pub, Msg, Fair                                    any
}

// Call builds the call.
func (a *SemRelease) Call() Call {
	c := Scripts().SemRelease.call(7, 11)
	c.argv = append(c.argv, a.Permits, a.Limits, a.Fences, a.Lock, a.Queue, a.Deadlines, a.Receipt,
		a.Token, a.Pub, a.Msg, a.Fair)
	return c
}

// SemDequeue calls sem_dequeue.lua: a permit waiter gives up.
type SemDequeue struct {
	Permits, Limits, Fences, Lock, Queue, Deadlines string
	Token, Pub, TTL, Timeout, Limit, Label, Msg     any
}

// Call builds the call.
func (a *SemDequeue) Call() Call {
	c := Scripts().SemDequeue.call(6, 13)
	c.argv = append(c.argv, a.Permits, a.Limits, a.Fences, a.Lock, a.Queue, a.Deadlines,
		a.Token, a.Pub, a.TTL, a.Timeout, a.Limit, a.Label, a.Msg)
	return c
}

// SemRenew calls sem_renew.lua: renew (or Extend) a permit's lease.
type SemRenew struct {
	Permits, Limits, Fences, Lock string
	Token, TTL, Fence             any
}

// Call builds the call.
func (a *SemRenew) Call() Call {
	c := Scripts().SemRenew.call(4, 7)
	c.argv = append(c.argv, a.Permits, a.Limits, a.Fences, a.Lock, a.Token, a.TTL, a.Fence)
	return c
}

// SemPTTL calls sem_pttl.lua: a permit's remaining lease, owner-checked.
type SemPTTL struct {
	Permits, Fences string
	Token, Fence    any
}

// Call builds the call.
func (a *SemPTTL) Call() Call {
	c := Scripts().SemPTTL.call(2, 4)
	c.argv = append(c.argv, a.Permits, a.Fences, a.Token, a.Fence)
	return c
}

// AcquireAll calls acquire_all.lua: take every lock of a set (one slot), or none.
type AcquireAll struct {
	Locks                            []string
	Token, TTL, Hold, Label, Waiting any
}

// Call builds the call.
func (a *AcquireAll) Call() Call {
	c := Scripts().AcquireAll.call(len(a.Locks), len(a.Locks)+5)
	for _, k := range a.Locks {
		c.argv = append(c.argv, k)
	}
	c.argv = append(c.argv, a.Token, a.TTL, a.Hold, a.Label, a.Waiting)
	return c
}

// ReleaseAll calls release_all.lua: release one hold of each lock of a set (one slot).
type ReleaseAll struct {
	Locks                 []string
	Token, Pub, Msg, Hold any
	Fences                []any
}

// Call builds the call.
func (a *ReleaseAll) Call() Call {
	c := Scripts().ReleaseAll.call(len(a.Locks), 2*len(a.Locks)+4)
	for _, k := range a.Locks {
		c.argv = append(c.argv, k)
	}
	c.argv = append(c.argv, a.Token, a.Pub, a.Msg, a.Hold)
	c.argv = append(c.argv, a.Fences...)
	return c
}

// RenewMany calls renew_many.lua: renew.lua's renewal of each of many locks with the same TTL, in
// one call. Items are the TTL, then, per lock, what its value starts with while the acquisition
// holds it (renew.lua's prefix: token NUL, and fence NUL when fenced). On a cluster every lock of
// a call must be in one slot.
type RenewMany struct {
	Locks []string
	Items []any
}

// Call builds the call.
func (a *RenewMany) Call() Call { return a.CallIn(nil) }

// CallIn builds the call in buf when it is large enough (the caller reuses it once the call's
// reply was read). The keys after the first are sent from Locks in place, as *string (no copy per
// lock): leave Locks unchanged until then. The first is a string, which routes the call.
func (a *RenewMany) CallIn(buf []any) Call {
	s, n := Scripts().RenewMany, len(a.Locks)
	c := Call{s: s, argv: buf[:0]}
	if cap(buf) < 3+n+len(a.Items) {
		c = s.call(n, n+len(a.Items))
	} else {
		c.argv = append(c.argv, s.cmd, nil, n)
	}
	for i := range a.Locks {
		if i == 0 {
			c.argv = append(c.argv, a.Locks[0])
		} else {
			c.argv = append(c.argv, &a.Locks[i])
		}
	}
	c.argv = append(c.argv, a.Items...)
	return c
}

package script

// One typed builder per script (package doc): string fields are keys, `any` fields arguments
// (boxed once by callers that reuse them); an optional last key ("") or argument (nil) is left out.

// lockCall starts s's call in line's room (see Line) with lock as its first key, and second, if
// not "", as its second. The lock key goes as an argument: the holder's boxed copy when it keeps
// one (a lock's acquire and release then share the one allocation its Keys made), else lock boxed
// for this call.
func lockCall(s *Script, line *Line, lock string, boxed any, second string) Call {
	c := s.call(line.take(3+9), 1, 9)
	if boxed == nil {
		boxed = lock
	}
	c.argv = append(c.argv, boxed)
	if second != "" {
		c.argv = append(c.argv, second)
		c.argv[2] = 2
	}
	return c
}

// Acquire calls acquire.lua: take a lock, re-enter it, or say how long it stays taken.
type Acquire struct {
	Lock, Guard                                    string
	Token, TTL, Label, Waiting, Hold, Floor, Entry any
	LockArg                                        any `script:"-"` // Lock boxed once (see lockCall)
}

// CallIn builds the call in line's room, when it is free (see Line).
func (a *Acquire) CallIn(line *Line) Call {
	c := lockCall(Scripts().Acquire, line, a.Lock, a.LockArg, a.Guard)
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
	c := Scripts().AcquireFair.call(nil, 3, 10)
	c.argv = append(c.argv, a.Lock, a.Queue, a.Deadlines, a.Token, a.TTL, a.Timeout, a.Hold, a.Label, a.Pub)
	if !absent(a.Entry) { // (an optional trailing argument)
		c.argv = append(c.argv, a.Entry)
	}
	return c
}

// Release calls release.lua: release one hold (and, with Set, write Value there).
type Release struct {
	Lock, Set                                     string
	Token, Fence, Msg, Hold, Pub, Value, ValueTTL any
	LockArg                                       any `script:"-"` // Lock boxed once (see lockCall)
}

// CallIn builds the call in line's room, when it is free (see Line).
func (a *Release) CallIn(line *Line) Call {
	c := lockCall(Scripts().Release, line, a.Lock, a.LockArg, a.Set)
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
	return Scripts().ReleaseFair.with(3, a.Lock, a.Queue, a.Deadlines, a.Token, a.Pub, a.Hold, a.Fence)
}

// Dequeue calls dequeue.lua: a fair waiter gives up.
type Dequeue struct {
	Lock, Queue, Deadlines                string
	Token, Pub, Hold, TTL, Timeout, Label any
}

// Call builds the call.
func (a *Dequeue) Call() Call {
	return Scripts().Dequeue.with(3, a.Lock, a.Queue, a.Deadlines,
		a.Token, a.Pub, a.Hold, a.TTL, a.Timeout, a.Label)
}

// Renew calls renew.lua: renew (or Extend) a lock's acquisition.
type Renew struct {
	Lock              string
	Token, TTL, Fence any
}

// Call builds the call.
func (a *Renew) Call() Call {
	return Scripts().Renew.with(1, a.Lock, a.Token, a.TTL, a.Fence)
}

// PTTL calls pttl.lua: a lock's remaining TTL, owner-checked.
type PTTL struct {
	Lock         string
	Token, Fence any
}

// Call builds the call.
func (a *PTTL) Call() Call {
	return Scripts().PTTL.with(1, a.Lock, a.Token, a.Fence)
}

// RaiseFence calls raise_fence.lua: Redlock's fence write-back.
type RaiseFence struct {
	Lock         string
	Fence, Token any
}

// Call builds the call.
func (a *RaiseFence) Call() Call {
	return Scripts().RaiseFence.with(1, a.Lock, a.Fence, a.Token)
}

// Inspect calls inspect.lua: what Client.Inspect reports. Read-only.
type Inspect struct {
	Lock, Queue, Deadlines, Permits, Limits, Fences, PQueue, PDeadlines string
	RW, RWLimits, RWFences, RWQueue, RWDeadlines                        string
}

// Call builds the call.
func (a *Inspect) Call() Call {
	return Scripts().Inspect.with(13, a.Lock, a.Queue, a.Deadlines, a.Permits, a.Limits, a.Fences,
		a.PQueue, a.PDeadlines, a.RW, a.RWLimits, a.RWFences, a.RWQueue, a.RWDeadlines)
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
	return Scripts().ForceRelease.with(13, a.Lock, a.Queue, a.Deadlines, a.Permits, a.Limits, a.Fences,
		a.PQueue, a.PDeadlines, a.RW, a.RWLimits, a.RWFences, a.RWQueue, a.RWDeadlines, a.Pub, a.Msg)
}

// SemAcquire calls sem_acquire.lua: take a permit (or a read-write lock's lease), or queue for one.
type SemAcquire struct {
	Permits, Limits, Fences, Lock, Queue, Deadlines string
	Token, TTL, Limit, Label, Timeout, Fair, Pub    any
}

// Call builds the call.
func (a *SemAcquire) Call() Call {
	return Scripts().SemAcquire.with(6, a.Permits, a.Limits, a.Fences, a.Lock, a.Queue, a.Deadlines,
		a.Token, a.TTL, a.Limit, a.Label, a.Timeout, a.Fair, a.Pub)
}

// SemRelease calls sem_release.lua: release a permit, handing it on.
type SemRelease struct {
	Permits, Limits, Fences, Lock, Queue, Deadlines, Receipt string
	Token, Pub, Msg, Fair                                    any
}

// Call builds the call.
func (a *SemRelease) Call() Call {
	return Scripts().SemRelease.with(7, a.Permits, a.Limits, a.Fences, a.Lock, a.Queue, a.Deadlines,
		a.Receipt, a.Token, a.Pub, a.Msg, a.Fair)
}

// SemDequeue calls sem_dequeue.lua: a permit waiter gives up.
type SemDequeue struct {
	Permits, Limits, Fences, Lock, Queue, Deadlines string
	Token, Pub, TTL, Timeout, Limit, Label, Msg     any
}

// Call builds the call.
func (a *SemDequeue) Call() Call {
	return Scripts().SemDequeue.with(6, a.Permits, a.Limits, a.Fences, a.Lock, a.Queue, a.Deadlines,
		a.Token, a.Pub, a.TTL, a.Timeout, a.Limit, a.Label, a.Msg)
}

// SemRenew calls sem_renew.lua: renew (or Extend) a permit's lease.
type SemRenew struct {
	Permits, Limits, Fences, Lock string
	Token, TTL, Fence             any
}

// Call builds the call.
func (a *SemRenew) Call() Call {
	return Scripts().SemRenew.with(4, a.Permits, a.Limits, a.Fences, a.Lock, a.Token, a.TTL, a.Fence)
}

// SemPTTL calls sem_pttl.lua: a permit's remaining lease, owner-checked.
type SemPTTL struct {
	Permits, Fences string
	Token, Fence    any
}

// Call builds the call.
func (a *SemPTTL) Call() Call {
	return Scripts().SemPTTL.with(2, a.Permits, a.Fences, a.Token, a.Fence)
}

// AcquireAll calls acquire_all.lua: take every lock of a set (one slot), or none.
type AcquireAll struct {
	Locks                            []string
	Token, TTL, Hold, Label, Waiting any
}

// Call builds the call.
func (a *AcquireAll) Call() Call {
	c := Scripts().AcquireAll.call(nil, len(a.Locks), len(a.Locks)+5)
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
	c := Scripts().ReleaseAll.call(nil, len(a.Locks), 2*len(a.Locks)+4)
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

// CallIn builds the call in buf when it is large enough (the caller reuses it once the call's
// reply was read). The keys after the first are sent from Locks in place, as *string (no copy per
// lock): leave Locks unchanged until then. The first is a string, which routes the call.
func (a *RenewMany) CallIn(buf []any) Call {
	n := len(a.Locks)
	c := Scripts().RenewMany.call(buf, n, n+len(a.Items))
	c.argv = append(c.argv, a.Locks[0])
	for i := 1; i < n; i++ {
		c.argv = append(c.argv, &a.Locks[i])
	}
	c.argv = append(c.argv, a.Items...)
	return c
}

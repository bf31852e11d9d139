package core

import "context"

// One name, one lock: a lock (neither Read, Write nor Permits, fair or not), a write, reads and
// permits of one name exclude each other (docs/guarantees.md, "One name, one lock"). The scripts
// enforce it: while reads, a write or permits are held, the name's lock key holds their family's
// mark (internal/script/lua/lock.lua), which keeps every other kind out and carries the name's
// one sequence of fences.

// kindOf names the kind of hold of l as Inspect reports it: "lock", "write", "read" or "permit".
func kindOf(l *Lock) string {
	switch {
	case l.rw != nil:
		return modeName(l.rw.mode)
	case l.k.Sem != nil:
		return "permit"
	}
	return "lock"
}

// kindOfOptions is kindOf for an acquisition about to be made with ao.
func kindOfOptions(ao *acquireOptions) string {
	switch {
	case ao.rw == rwWrite:
		return "write"
	case ao.rw != 0:
		return "read"
	case ao.permits != 0:
		return "permit"
	}
	return "lock"
}

// selfExcluded refuses an acquisition of name made through the context of a hold of the same
// Client on the same name of a kind it cannot share or nest in: it would wait for itself until
// that hold ends. Re-entries (a lock in a lock, a read or write nested in a write, a read in a
// read) and permits beside permits go on as documented.
func (c *Client) selfExcluded(ctx context.Context, name string, ao *acquireOptions) error {
	want := kindOfOptions(ao)
	l, _ := ctx.Value(heldKey{}).(*Lock)
	for l != nil {
		l.mu.Lock()
		held, parent := l.state == stateHeld, l.vctx.Context
		l.mu.Unlock()
		if l.c == c && l.k.Name == name && held {
			have := kindOf(l)
			switch {
			case have == want, have == "write" && want == "read", have == "read" && want == "write":
				return nil // a re-entry, a nested hold, or an upgrade (refused by initRW)
			}
			return invalid("%q is held by this context's %s: a %s of the same name would wait for it (one name, one lock; release it first)",
				name, have, want)
		}
		if parent == nil {
			return nil
		}
		l, _ = parent.Value(heldKey{}).(*Lock)
	}
	return nil
}

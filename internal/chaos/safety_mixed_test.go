package chaos_test

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/chaos"
)

// TestChaosSafetyMixed is the randomized safety checker's mixed-kinds variant (one name, one lock:
// docs/guarantees.md): workers on several clients (each through its own proxy) take every kind of
// hold — locks (fair or not), writes, reads and permits (limits 2 and 3) — of the same two names by
// Acquire, TryAcquire and Do, and both names' exclusive side at once by AcquireAll, TryAcquireAll
// and DoAll (sets, recorded as a lock of each name); they re-enter locks through the lock's
// context, nest reads and writes in their read and write holds, try upgrades and kinds of hold
// that would wait for their own hold (both must be ErrInvalid), Extend, Release and close their
// client. Faults: the read-write variant's (reply delay, loss, reset, server pause) and the lock
// variants' key losses (DEL, FLUSHALL, a restart without persistence) and operator
// (Client.ForceRelease of a random name); see safety_mixed_faults_test.go. The oracle: a lock or a
// write never beside another hold of its name (over-limit, their limit being 1), a read never
// beside a permit (cross-kind), permits never more than the lowest limit (over-limit), fences of a
// name increasing in grant order across every kind (fence), nested holds, re-entries, refused
// upgrades and self-exclusions as the read-write variant checks them; a key loss excuses the holds
// whose keys it deleted while they stay within their bound, and ends them by it (loss-late): a
// loss of the name's lock key (which holds the marks of its permits and read-write holds),
// ForceRelease, FLUSHALL and a restart every hold of the name. Between kinds the order is not
// FIFO, so there is no starvation check.
//
// The seed and its replay work as for TestChaosSafety (-seed N or LOCKKIT_SAFETY_SEED); the run
// lasts 8 s (LOCKKIT_CHAOS=full: 80 s; LOCKKIT_SAFETY_DURATION sets twice this length).
// LOCKKIT_SAFETY_SKIP leaves out what it leaves out of the lock variants (force, keyloss, set, ctx,
// ...). A DEL of the lock key deletes it alone (a family's mark without its leases) or with the
// leases of the family whose mark it holds (see mixedDel).
func TestChaosSafetyMixed(t *testing.T) {
	seed := safetySeed(t)
	t.Logf("mixed-kinds safety checker seed %d: replay with -args -seed %d or LOCKKIT_SAFETY_SEED=%d", seed, seed, seed)
	dur := halfSafetyDuration(t, time.Duration(pick(8, 80))*time.Second)
	const msec = time.Millisecond
	rep := &chaos.Report{}
	runRW(t, rep, seed, safetyConfig{name: "mixed", nodes: 1, slots: 4, workers: 3, names: []string{"mx0", "mx1"}, mixed: true,
		ttls: []time.Duration{100 * msec, 200 * msec, 300 * msec, 500 * msec, time.Second, 2 * time.Second}, dur: dur})
	t.Logf("mixed-kinds safety checker (seed %d):\n\n%s", seed, rep.Markdown())
}

package gocronlock

import (
	"errors"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

// Errors of the package. Each but ErrStopped matches one of core's sentinel errors too (errors.Is);
// errors returned wrap them with the job, the run or the option concerned.
var (
	// ErrInvalid means an argument or option was rejected. It matches core.ErrInvalid; the errors
	// that match it read "lockkit: gocronlock: what is wrong".
	ErrInvalid = adapter.Sentinel("gocronlock")
	// ErrDone is the error of a lock for a run that has run already (on any replica): its
	// completion marker exists. gocron skips the run and reports the error to AfterLockError. It
	// matches core.ErrGuarded.
	ErrDone error = &sentinel{"lockkit: gocronlock: run done already", core.ErrGuarded}
	// ErrBusy is the error of a lock while another run of the job holds its lock, on this replica
	// or another. It matches core.ErrNotAcquired (and wraps a *core.NotAcquiredError when another
	// replica holds the lock).
	ErrBusy error = &sentinel{"lockkit: gocronlock: job busy", core.ErrNotAcquired}
	// ErrOffSchedule is the error of a lock for a run that comes more than half a second (or half
	// the period of a shorter DurationJob) away from any activation of the job on the Locker's
	// clock: a Job.RunNow, a WithIntervalFromCompletion run, a run queued behind a limit, or a clock
	// or location that is not the scheduler's. Such a run cannot be matched across replicas and is
	// not run; the refusal is logged at Error. It matches core.ErrInvalid.
	ErrOffSchedule error = &sentinel{"lockkit: gocronlock: not a scheduled run", core.ErrInvalid}
	// ErrNotLocked is the error of a job added with Locker.NewJob that gocron ran without the
	// Locker's lock (a scheduler with an Elector, or WithDisabledDistributedJobLocker): the job
	// is not run. It matches core.ErrNotHeld.
	ErrNotLocked error = &sentinel{"lockkit: gocronlock: job ran without its lock", core.ErrNotHeld}
	// ErrNotLeader is the error of IsLeader, and of a job wrapped by Elector.Task, on a replica
	// that does not lead: it never did, or its term ended (then the term's cause is joined: a
	// *core.LostError when leadership was lost). It matches core.ErrNotHeld.
	ErrNotLeader error = &sentinel{"lockkit: gocronlock: not the leader", core.ErrNotHeld}
	// ErrStopped is the cause of the term's context, and of the context of the jobs running under
	// it, after Elector.Stop (or the end of the context given to Start).
	ErrStopped = errors.New("lockkit: gocronlock: elector stopped")
)

// sentinel is an error of the package that matches one of core's.
type sentinel struct {
	msg     string
	coreErr error
}

func (e *sentinel) Error() string { return e.msg }

// Unwrap returns core's sentinel error.
func (e *sentinel) Unwrap() error { return e.coreErr }

package gocronlock

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/lockkit/lockkit/internal/exactlyonce"
)

// markerKind is the kind of a completion marker among exactlyonce records (cronlock's too); its
// payload is "ok" or "failed".
const markerKind = 'm'

// tickRequest is the exactly-once request of the run of job name at tick: the job's lock, and the
// run's completion marker as the record, whose key carries the lock's hash tag followed by the
// activation in Unix milliseconds (PREFIX gocron:{@gocron/JOB}:MS) and whose fingerprint is the
// activation's.
func (l *Locker) tickRequest(name string, tick time.Time) *exactlyonce.Request {
	ms := strconv.FormatInt(tick.UnixMilli(), 10)
	fp := sha256.Sum256([]byte(ms))
	return &exactlyonce.Request{
		Key:         l.store.KeyNamed(name, ":"+ms),
		Fingerprint: func() ([sha256.Size]byte, error) { return fp, nil },
		Log:         []slog.Attr{slog.String("job", name), slog.Time("run", tick)},
	}
}

// run is one run of a job on this replica, from its Lock to its Unlock: the gocron.Lock that Lock
// returns.
type run struct {
	l    *Locker
	j    *job
	tick time.Time
	req  *exactlyonce.Request

	mu      sync.Mutex
	er      *exactlyonce.Run // set once the lock is taken
	started bool             // the job was called
	failed  bool             // it returned an error or panicked
	ended   bool             // Unlock was called
}

// free ends the run's claim on its job on this replica.
func (r *run) free() {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if r.j.held == r {
		r.j.held = nil
	}
}

// begin marks the run started and returns its exactly-once run, or nil if the lock was not taken
// or the run started or ended already.
func (r *run) begin() *exactlyonce.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.er == nil || r.started || r.ended {
		return nil
	}
	r.started = true
	return r.er
}

// Unlock implements gocron.Lock: it releases the job's lock, writing the run's completion marker
// ("ok", or "failed" if the job returned an error or panicked) in the same script, so that no
// replica runs the run again. If gocron did not call the job (a BeforeJobRunsSkipIfBeforeFuncErrors
// listener failed), it releases the lock without a marker. Nothing is written if the lock was lost
// or reached its maximum hold while the job ran: the error then matches core.ErrLost or
// core.ErrMaxHold, and another replica may run the run again. gocron ignores the error; failures
// are logged (WithLogger). A second Unlock does nothing.
func (r *run) Unlock(ctx context.Context) error {
	r.mu.Lock()
	if r.ended || r.er == nil {
		r.mu.Unlock()
		return nil
	}
	r.ended = true
	started, failed := r.started, r.failed
	r.mu.Unlock()
	defer r.free()
	if !started {
		return r.er.Release(ctx, "")
	}
	val := "ok"
	if failed {
		val = "failed"
	}
	fp, _ := r.req.Fingerprint()
	return r.er.Store(ctx, exactlyonce.Encode(markerKind, fp, []byte(val)), r.l.markerTTL(r.j.sched, r.tick, r.l.opt.clock()))
}

// task is the function gocron runs for job j: j.fn under the lock's context of the run that Lock
// took on this goroutine just before. Run without that lock (an elector on the scheduler, or
// gocron.WithDisabledDistributedJobLocker), it calls nothing and fails with ErrNotLocked, logged
// at Error. The lock's context derives from the one gocron passed to Lock, the job's own context,
// so it also ends when gocron stops the job.
func (l *Locker) task(j *job) func(ctx context.Context) error {
	return func(context.Context) error {
		l.mu.Lock()
		r := j.held
		l.mu.Unlock()
		var er *exactlyonce.Run
		if r != nil {
			er = r.begin()
		}
		if er == nil {
			err := fmt.Errorf("%w: job %q", ErrNotLocked, j.name)
			l.opt.Log().LogAttrs(context.Background(), slog.LevelError, "lockkit: gocronlock: run refused",
				slog.String("job", j.name), slog.Any("error", err))
			return err
		}
		failed := true // until fn returns: a panic leaves it set
		defer func() {
			r.mu.Lock()
			r.failed = failed
			r.mu.Unlock()
		}()
		err := j.fn(context.WithValue(er.Context(), tickKey{}, r.tick))
		failed = err != nil
		return err
	}
}

type tickKey struct{}

// Tick returns the activation that a job added with Locker.NewJob runs for, from the job's
// context: the same time on every replica, whatever its clock's skew.
func Tick(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(tickKey{}).(time.Time)
	return t, ok
}

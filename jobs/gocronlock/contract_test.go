package gocronlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/gocronlock"
)

// The errors of invalid options read as every adapter's, "lockkit: gocronlock: WHAT", and an
// option of the other constructor is named with the constructor it does not apply to.
func TestOptions_errorTexts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locks := locktest.NewClient(t, srv.Client(t))
	e, err := election.New(locks, srv.Client(t), "gocronlock-contract")
	if err != nil {
		t.Fatal(err)
	}
	_, lerr := gocronlock.NewLocker(locks, gocronlock.WithValue("x"))
	_, eerr := gocronlock.NewElector(e, gocronlock.WithTTL(time.Second))
	_, terr := gocronlock.NewLocker(locks, gocronlock.WithTTL(time.Millisecond))
	for err, want := range map[error]string{
		lerr: "lockkit: gocronlock: WithValue does not apply to NewLocker",
		eerr: "lockkit: gocronlock: WithTTL does not apply to NewElector",
		terr: "lockkit: gocronlock: WithTTL(1ms) is outside [10ms, 24h0m0s]",
	} {
		if err == nil || err.Error() != want || !errors.Is(err, gocronlock.ErrInvalid) || !errors.Is(err, core.ErrInvalid) {
			t.Errorf("error %v, want %q matching ErrInvalid and core.ErrInvalid", err, want)
		}
	}
}

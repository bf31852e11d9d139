package httpmw_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// panicOf returns what build panicked with, nil if it did not.
func panicOf(build func()) (p any) {
	defer func() { p = recover() }()
	build()
	return nil
}

// An option of one middleware given to the other is refused at construction, in the one error
// shape, naming the option and the constructor; options of both are accepted by both.
func TestOptions_misplacedAreRefused(t *testing.T) {
	_, locks := setup(t)
	key := httpmw.ByPathValue("id")
	idempotencyOnly := map[string]httpmw.Option{
		"WithMethods":            httpmw.WithMethods("PUT"),
		"RequireKey":             httpmw.RequireKey(),
		"WithScope":              httpmw.WithScope(func(*http.Request) string { return "" }),
		"WithFingerprintHeaders": httpmw.WithFingerprintHeaders("X-Tenant"),
		"ConflictOnMismatch":     httpmw.ConflictOnMismatch(),
		"StoreServerErrors":      httpmw.StoreServerErrors(),
		"WithMaxBody":            httpmw.WithMaxBody(10),
		"WithMaxRequestBody":     httpmw.WithMaxRequestBody(10),
		"WithRetention":          httpmw.WithRetention(time.Hour),
		"WithRecordPrefix":       httpmw.WithRecordPrefix("x:"),
	}
	for name, opt := range idempotencyOnly {
		err, _ := panicOf(func() { httpmw.KeyLock(locks, key, opt) }).(error)
		if want := "lockkit: httpmw: " + name + " does not apply to KeyLock"; !errors.Is(err, core.ErrInvalid) || err.Error() != want {
			t.Errorf("KeyLock(%s): panicked with %v, want %q", name, err, want)
		}
		if p := panicOf(func() { httpmw.Idempotency(locks, opt) }); p != nil {
			t.Errorf("Idempotency(%s): panicked with %v", name, p)
		}
	}
	keyLockOnly := map[string]httpmw.Option{
		"WithNamespace": httpmw.WithNamespace("orders"),
		"WithLimit":     httpmw.WithLimit(2),
		"WithKeys":      httpmw.WithKeys(httpmw.Keys(key)),
		"WithReadWrite": httpmw.WithReadWrite(),
	}
	for name, opt := range keyLockOnly {
		err, _ := panicOf(func() { httpmw.Idempotency(locks, opt) }).(error)
		if want := "lockkit: httpmw: " + name + " does not apply to Idempotency"; !errors.Is(err, core.ErrInvalid) || err.Error() != want {
			t.Errorf("Idempotency(%s): panicked with %v, want %q", name, err, want)
		}
	}
	both := []httpmw.Option{httpmw.WithTTL(time.Second), httpmw.WithWait(time.Second), httpmw.FailOpen(),
		httpmw.WithLogger(slog.Default())}
	if p := panicOf(func() { httpmw.KeyLock(locks, key, both...); httpmw.Idempotency(locks, both...) }); p != nil {
		t.Errorf("options of both middlewares: panicked with %v", p)
	}
}

// Invalid options panic with "lockkit: httpmw: WHAT", matching core.ErrInvalid, "lockkit" once.
func TestOptions_errorShape(t *testing.T) {
	_, locks := setup(t)
	key := httpmw.ByPathValue("id")
	for want, build := range map[string]func(){
		"lockkit: httpmw: WithTTL(1ms) is outside [10ms, 24h0m0s]": func() { httpmw.KeyLock(locks, key, httpmw.WithTTL(time.Millisecond)) },
		"lockkit: httpmw: WithWait(-1s) is negative":               func() { httpmw.Idempotency(locks, httpmw.WithWait(-time.Second)) },
		`lockkit: httpmw: WithNamespace("A/B") must be 1 to 64 of a-z, 0-9 and '-'`: func() {
			httpmw.KeyLock(locks, key, httpmw.WithNamespace("A/B"))
		},
		"lockkit: httpmw: KeyLock has no key: give it a KeyFunc or WithKeys": func() { httpmw.KeyLock(locks, nil) },
		"lockkit: httpmw: KeyLock needs a *core.Client":                      func() { httpmw.KeyLock(nil, key) },
		"lockkit: httpmw: Idempotency needs a *core.Client":                  func() { httpmw.Idempotency(nil) },
	} {
		err, _ := panicOf(build).(error)
		if !errors.Is(err, core.ErrInvalid) || err.Error() != want || strings.Count(err.Error(), "lockkit") != 1 {
			t.Errorf("panicked with %v, want %q matching core.ErrInvalid", err, want)
		}
	}
}

// Without WithWait both middlewares answer a held key at once, in one round trip: 409 with
// Retry-After. KeyLock used to wait 5 s.
func TestOptions_defaultWaitIsZero(t *testing.T) {
	srv, locks := setup(t)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	url := lockedAPI(t, locks, h)
	send(t, "PUT", url+"/orders/0", "", "") // loads the scripts
	held, err := locks.Acquire(context.Background(), "order/1", 10*time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	srv.ResetStats(t)
	start := time.Now()
	r := send(t, "PUT", url+"/orders/1", "", "")
	wantProblem(t, r, 409, "resource-locked")
	if n := roundTrips(t, srv); n != 1 || time.Since(start) > 4*time.Second {
		t.Fatalf("a held key took %d round trips and %v, want 1 at once", n, time.Since(start))
	}
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
}

// Without WithLogger, what the client is not told goes to slog.Default() (read when logging, so a
// later slog.SetDefault counts); a discarding logger silences it.
func TestOptions_loggerDefaultsToSlogDefault(t *testing.T) {
	srv := redistest.Start(t)
	locks := locktest.NewClient(t, downClient(t, srv))
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	quiet := lockedAPI(t, locks, h, httpmw.WithLogger(slog.New(slog.DiscardHandler)))
	loud := lockedAPI(t, locks, h)
	var logs logBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(logs.logger())
	srv.Stop(t)
	wantProblem(t, send(t, "PUT", quiet+"/orders/1", "", ""), 503, "lock-unavailable")
	if strings.Contains(logs.String(), "key lock unavailable") {
		t.Fatalf("a discarding logger logged to slog.Default(): %s", logs.String())
	}
	wantProblem(t, send(t, "PUT", loud+"/orders/1", "", ""), 503, "lock-unavailable")
	if !strings.Contains(logs.String(), "lockkit: httpmw: key lock unavailable") {
		t.Fatalf("nothing logged to slog.Default(): %q", logs.String())
	}
}

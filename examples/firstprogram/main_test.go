package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/lockkittest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRebuildIndex is the README's unit test: a client over an embedded Redis, closed with the test.
func TestRebuildIndex(t *testing.T) {
	locks := lockkittest.NewClient(t)
	if err := rebuildIndex(t.Context(), locks); err != nil {
		t.Fatal(err)
	}
}

// TestDeposit_accountBusy_409 holds account 42's lock (KeyLock's locks are in core's namespace
// "http") and checks that a deposit into 42 is refused while one into 7 goes through.
func TestDeposit_accountBusy_409(t *testing.T) {
	locks := lockkittest.NewClient(t)
	held, err := locks.TryAcquire(t.Context(), "42", 10*time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(t.Context()) }()
	for account, want := range map[string]int{"42": http.StatusConflict, "7": http.StatusOK} {
		rec := httptest.NewRecorder()
		routes(locks).ServeHTTP(rec, httptest.NewRequest("POST", "/accounts/"+account+"/deposit", nil))
		if rec.Code != want {
			t.Errorf("deposit into %s: status %d, want %d", account, rec.Code, want)
		}
	}
}

// TestMainRuns runs the program itself, as `go run ./examples/firstprogram` does.
func TestMainRuns(t *testing.T) { main() }

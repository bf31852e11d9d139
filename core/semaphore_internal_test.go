package core

import (
	"testing"

	"github.com/lockkit/lockkit/core/internal/store"
)

func TestKeys_initSem(t *testing.T) {
	var k store.Keys
	k.InitSem("lk:", "a/b", 3)
	want := map[string]string{
		"permits":   "lk:{a/b}:permits",
		"lock":      "lk:{a/b}",
		"queue":     "lk:{a/b}:permits:queue",
		"deadlines": "lk:{a/b}:permits:queue:deadlines",
		"receipt":   "lk:{a/b}:permits:receipt",
		"channel":   "lk:{a/b}:permits:released",
		"limits":    "lk:{a/b}:permits:limits",
		"fences":    "lk:{a/b}:permits:fences",
	}
	got := map[string]string{"permits": k.Main, "lock": k.Sem.Lock, "queue": k.Queue, "deadlines": k.Deadlines,
		"receipt": k.Sem.Receipt, "channel": k.Channel, "limits": k.Sem.Limits, "fences": k.Sem.Fences}
	for what, w := range want {
		if got[what] != w {
			t.Errorf("%s = %q, want %q", what, got[what], w)
		}
	}
	if k.Name != "a/b" || k.Sem.Limit != 3 {
		t.Errorf("name %q limit %d", k.Name, k.Sem.Limit)
	}
	k2 := k
	k2.Held(42)
	if k2.Sem.Receipt != want["receipt"]+":42" || k.Sem.Receipt != want["receipt"] {
		t.Errorf("receipt after held: %q (the original's %q)", k2.Sem.Receipt, k.Sem.Receipt)
	}
	var l store.Keys
	l.Init("lk:", "a/b")
	if l.Main != "lk:{a/b}" || l.Channel != "lk:{a/b}:released" || l.Queue != "lk:{a/b}:queue" ||
		l.Deadlines != "lk:{a/b}:queue:deadlines" || l.Main != want["lock"] {
		t.Errorf("lock keys %q %q %q %q", l.Main, l.Channel, l.Queue, l.Deadlines)
	}
}

// A give-back's receipt is its own: never the bare name another give-back of the name used.
func TestKeys_givenBack_receiptPerToken(t *testing.T) {
	var k store.Keys
	k.InitSem("lk:", "pool", 2)
	a, b := k.GivenBack("tok-a"), k.GivenBack("tok-b")
	if a.Sem.Receipt == k.Sem.Receipt || a.Sem.Receipt == b.Sem.Receipt {
		t.Fatalf("give-back receipts %q %q (bare %q)", a.Sem.Receipt, b.Sem.Receipt, k.Sem.Receipt)
	}
	if k.Sem.Receipt != "lk:{pool}:permits:receipt" {
		t.Fatalf("givenBack changed the original keys: %q", k.Sem.Receipt)
	}
	var l store.Keys
	l.Init("lk:", "lock")
	if l.GivenBack("tok-a") != l {
		t.Fatal("a lock's give-back keys differ (its release passes the fence instead)")
	}
}

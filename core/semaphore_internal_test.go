package core

import "testing"

func TestKeys_initSem(t *testing.T) {
	var k keys
	k.initSem("lk:", "a/b", 3)
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
	got := map[string]string{"permits": k.main, "lock": k.sem.lock, "queue": k.queue, "deadlines": k.dls,
		"receipt": k.sem.receipt, "channel": k.channel, "limits": k.sem.limits, "fences": k.sem.fences}
	for what, w := range want {
		if got[what] != w {
			t.Errorf("%s = %q, want %q", what, got[what], w)
		}
	}
	if k.name != "a/b" || k.sem.limit != 3 {
		t.Errorf("name %q limit %d", k.name, k.sem.limit)
	}
	k2 := k
	k2.held(42)
	if k2.sem.receipt != want["receipt"]+":42" || k.sem.receipt != want["receipt"] {
		t.Errorf("receipt after held: %q (the original's %q)", k2.sem.receipt, k.sem.receipt)
	}
	var l keys
	l.init("lk:", "a/b")
	if l.main != "lk:{a/b}" || l.channel != "lk:{a/b}:released" || l.queue != "lk:{a/b}:queue" ||
		l.dls != "lk:{a/b}:queue:deadlines" || l.main != want["lock"] {
		t.Errorf("lock keys %q %q %q %q", l.main, l.channel, l.queue, l.dls)
	}
}

// A give-back's receipt is its own: never the bare name another give-back of the name used.
func TestKeys_givenBack_receiptPerToken(t *testing.T) {
	var k keys
	k.initSem("lk:", "pool", 2)
	a, b := k.givenBack("tok-a"), k.givenBack("tok-b")
	if a.sem.receipt == k.sem.receipt || a.sem.receipt == b.sem.receipt {
		t.Fatalf("give-back receipts %q %q (bare %q)", a.sem.receipt, b.sem.receipt, k.sem.receipt)
	}
	if k.sem.receipt != "lk:{pool}:permits:receipt" {
		t.Fatalf("givenBack changed the original keys: %q", k.sem.receipt)
	}
	var l keys
	l.init("lk:", "lock")
	if l.givenBack("tok-a") != l {
		t.Fatal("a lock's give-back keys differ (its release passes the fence instead)")
	}
}

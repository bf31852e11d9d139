package core

import "testing"

func TestKeys_initSem(t *testing.T) {
	var k keys
	k.initSem("lk:", "a/b", 3)
	want := map[string]string{
		"permits":   "lk:{a/b}:permits",
		"fence":     "lk:{a/b}:fence",
		"queue":     "lk:{a/b}:permits:queue",
		"deadlines": "lk:{a/b}:permits:queue:deadlines",
		"receipt":   "lk:{a/b}:permits:receipt",
		"channel":   "lk:{a/b}:permits:released",
		"limits":    "lk:{a/b}:permits:limits",
		"fences":    "lk:{a/b}:permits:fences",
		"waiters":   "lk:{a/b}:permits:queue:waiters",
	}
	got := map[string]string{"permits": k.arr[0], "fence": k.arr[1], "queue": k.arr[2], "deadlines": k.arr[3],
		"receipt": k.arr[4], "channel": k.channel, "limits": k.sem.limits, "fences": k.sem.fences,
		"waiters": k.sem.waiters}
	for what, w := range want {
		if got[what] != w {
			t.Errorf("%s = %q, want %q", what, got[what], w)
		}
	}
	if k.sem.acquire != [7]string{want["permits"], want["limits"], want["fences"], want["fence"], want["queue"], want["deadlines"], want["waiters"]} ||
		k.sem.renew != [3]string{want["permits"], want["limits"], want["fences"]} || k.rel[0] != want["permits"] || k.rel[1] != want["receipt"] || k.name != "a/b" {
		t.Errorf("key lists %v %v %v", k.sem.acquire, k.sem.renew, k.rel)
	}
	k.held(42)
	if k.arr[4] != want["receipt"]+":42" || k.rel[1] != k.arr[4] {
		t.Errorf("receipt after held: %q %q", k.arr[4], k.rel[1])
	}
}

// A give-back's receipt is its own: never the bare name another give-back of the name used.
func TestKeys_givenBack_receiptPerToken(t *testing.T) {
	var k keys
	k.initSem("lk:", "pool", 2)
	a, b := k.givenBack("tok-a"), k.givenBack("tok-b")
	if a.arr[4] == k.arr[4] || a.arr[4] == b.arr[4] || a.rel[1] != a.arr[4] {
		t.Fatalf("give-back receipts %q %q (bare %q)", a.arr[4], b.arr[4], k.arr[4])
	}
	if k.arr[4] != "lk:{pool}:permits:receipt" {
		t.Fatalf("givenBack changed the original keys: %q", k.arr[4])
	}
	var l keys
	l.init("lk:", "lock")
	if l.givenBack("tok-a") != l {
		t.Fatal("a lock's give-back keys differ (its release passes the fence instead)")
	}
}

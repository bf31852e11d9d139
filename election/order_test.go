package election

import (
	"fmt"
	"strings"
	"testing"
)

// The observer's ordering rules, step by step: "a F" is an announcement of fence F arriving;
// "r STATE" a read sent now (STATE: "leader F", "held F" (taken, not proclaimed), "free F" or
// "none" (no key)); "s" the pending read settled (its PING answered, or the subscription failed).
// want is what is reported, in order: a fence, or "-" for a vacancy.
func TestOrder(t *testing.T) {
	cases := []struct {
		name  string
		steps string
		want  string
	}{
		{"announcements in fence order", "a 5, a 6, a 6, a 4, a 7", "5 6 7"},
		{"a vacancy does not reset the order", "a 5, r free 5, s, a 4, a 5, a 6", "5 - 6"},
		{"the first report: nobody leads", "r none, s, r free 3, s", "-"},
		{"the first report: a leader", "r leader 3, s, r leader 3, s", "3"},
		{"no vacancy twice", "a 5, r free 5, s, r none, s, r held 6, s", "5 -"},
		{"a read ahead of announcements still on their way", "a 5, r leader 7, a 6, a 7, s", "5 6 7"},
		{"the read wins when its announcements were lost", "a 5, r leader 7, s, a 6, a 7, a 8", "5 7 8"},
		{"a read behind the reports", "a 5, a 6, r leader 5, s", "5 6"},
		{"free: the terms up to its fence ended", "a 5, r free 6, a 6, s", "5 6 -"},
		{"free: a term announced after the read is live", "a 5, r free 6, a 6, a 8, s", "5 6 8"},
		{"taken, not proclaimed: the terms before it ended", "a 5, r held 6, s, a 6", "5 - 6"},
		{"taken, then proclaimed before the read settled", "a 5, r held 6, a 6, s", "5 6"},
		{"no key: the last term ended", "a 5, r none, s", "5 -"},
		{"no key: a term announced after the read is live", "a 5, r none, a 6, s", "5 6"},
		{"an old free lock", "a 5, a 8, r free 6, s", "5 8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				o       order
				got     []string
				pending *lockState
				top     int64
			)
			report := func(l Leader) {
				if l == (Leader{}) {
					got = append(got, "-")
				} else {
					got = append(got, fmt.Sprint(l.Fence))
				}
			}
			for _, step := range strings.Split(c.steps, ", ") {
				var f int64
				var kind string
				switch {
				case step == "s":
					if l, ok := o.settle(*pending, top); ok {
						report(l)
					}
					pending = nil
				case step == "r none":
					pending, top = &lockState{}, o.top
				case strings.HasPrefix(step, "a "):
					fmt.Sscanf(step, "a %d", &f)
					if l := (Leader{Value: "v", Fence: f}); o.announced(l) {
						report(l)
					}
				default:
					fmt.Sscanf(step, "r %s %d", &kind, &f)
					s := lockState{fence: f, held: kind != "free"}
					if kind == "leader" {
						s.leader = Leader{Value: "v", Fence: f}
					}
					pending, top = &s, o.top
				}
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Fatalf("%s: reported %q, want %q", c.steps, g, c.want)
			}
		})
	}
}

// A read is settled at once when it shows nothing newer than the reports, or no leader after a
// reported vacancy; otherwise it waits for the announcements published before it.
func TestOrder_caughtUp(t *testing.T) {
	leading := order{top: 5, any: true}
	vacant := order{top: 5, any: true, vacant: true}
	cases := []struct {
		o    order
		s    lockState
		want bool
	}{
		{order{}, lockState{}, false}, // the first read: nothing reported yet
		{leading, lockState{fence: 5, held: true, leader: Leader{"v", 5}}, true},
		{leading, lockState{fence: 5}, true},
		{leading, lockState{fence: 4}, true},
		{leading, lockState{fence: 6}, false},
		{leading, lockState{fence: 6, held: true}, false},
		{leading, lockState{fence: 6, held: true, leader: Leader{"v", 6}}, false},
		{leading, lockState{}, false},
		{vacant, lockState{}, true},
		{vacant, lockState{fence: 7}, true},
		{vacant, lockState{fence: 7, held: true}, true},
		{vacant, lockState{fence: 7, held: true, leader: Leader{"v", 7}}, false},
	}
	for _, c := range cases {
		if got := c.o.caughtUp(c.s); got != c.want {
			t.Errorf("%+v, read %+v: caughtUp %v, want %v", c.o, c.s, got, c.want)
		}
	}
}

package chaos_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The failover variant's topology and fault schedule. Two redis-servers: a master and a replica
// that reaches it through a relay (its replication link, which can be cut). Each client slot
// reaches the master through its own chaos proxy (the path faults of the other variants) and then a
// relay that a failover moves to the new master, as a Sentinel client moves when it learns of a
// +switch-master; the watchers reach the master through a relay of their own. A promotion is
// Redis's own (REPLICAOF NO ONE, what Sentinel sends), so the new master has exactly the data the
// replica had, expiries included; the old master comes back empty (killed) or with what it had
// (stopped) and is made a replica of the new one before anything else.

// failover is one promotion of the replica, as the oracle sees it. Times are history times.
type failover struct {
	Kind    string          `json:"kind"`    // kill, stop (the master paused), stall (the replica stalled first)
	From    time.Duration   `json:"from"`    // the fault began: the replica stalled, or the master went down
	Down    time.Duration   `json:"down"`    // the master was killed or paused
	Promote time.Duration   `json:"promote"` // REPLICAOF NO ONE was sent to the replica
	Switch  []time.Duration `json:"switch"`  // per client slot: when its path moved to the new master
	Synced  time.Duration   `json:"synced"`  // a replica in sync again (the end of the fault)
}

// failoverTopo is the master, its replica and the paths to them.
type failoverTopo struct {
	t      *testing.T
	h      *history
	srvs   [2]*redistest.Server
	link   [2]*relay // link[i]: how a replica reaches server i
	paths  []*relay  // per client slot: to the master
	admin  *relay    // the watchers' path to the master
	master int
	acked  []bool // per client slot: whether it uses WithReplicaAck
	fos    []failover
}

func startFailoverTopo(t *testing.T, h *history, slots int) *failoverTopo {
	ft := &failoverTopo{t: t, h: h}
	for i, s := range redistest.StartN(t, 2) {
		ft.srvs[i], ft.link[i] = s, newRelay(t, s.Addr())
	}
	ft.replicaOf(1, 0)
	ft.waitSynced()
	for range slots {
		ft.paths = append(ft.paths, newRelay(t, ft.srvs[0].Addr()))
	}
	ft.admin = newRelay(t, ft.srvs[0].Addr())
	return ft
}

func (ft *failoverTopo) replica() int { return 1 - ft.master }

// replicaOf makes server r a replica of server m, through m's link.
func (ft *failoverTopo) replicaOf(r, m int) {
	ft.srvs[r].Do(ft.t, "REPLICAOF", "127.0.0.1", strconv.Itoa(ft.link[m].Port()))
}

// waitSynced waits until the master has its replica online and the replica its link up, and
// returns when.
func (ft *failoverTopo) waitSynced() time.Duration {
	m, r := ft.srvs[ft.master], ft.srvs[ft.replica()]
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mi, _ := m.Do(ft.t, "INFO", "replication").(string)
		ri, _ := r.Do(ft.t, "INFO", "replication").(string)
		if strings.Contains(mi, "state=online") && strings.Contains(ri, "master_link_status:up") {
			return ft.h.now()
		}
		if time.Now().After(deadline) {
			ft.t.Fatalf("failover: replica %s not in sync with %s after 20 s:\n%s\n%s", r.Addr(), m.Addr(), mi, ri)
		}
	}
}

// failoverKinds are the faults of the failover variant, weighted: a replica that stalls right
// after acknowledging an acquisition and is then promoted (4; 6 with WithReplicaAck, where it is
// what the promise is about), a master killed (2) or stopped (2) and its replica promoted, a
// replica that stalls and catches up (1), and a storm of the other variants' path faults (1).
// LOCKKIT_SAFETY_SKIP leaves kinds out (the storm's own kinds too).
var failoverKinds = [...]string{"stall", "stall", "stall", "stall", "kill", "kill", "stop", "stop", "lag", "storm"}

// inject runs faults separated by calm periods, on the test goroutine, until end.
func (ft *failoverTopo) inject(rnd *rand.Rand, end time.Time, pxs [][]*chaos.Proxy, skip map[string]bool) {
	var kinds []string
	for _, k := range failoverKinds {
		if !skip[k] {
			kinds = append(kinds, k)
		}
	}
	if slices.Contains(ft.acked, true) && !skip["stall"] {
		kinds = append(kinds, "stall", "stall")
	}
	for len(kinds) > 0 {
		calm := randIn(rnd, 300*time.Millisecond, time.Second)
		if time.Now().Add(calm).After(end) {
			return
		}
		time.Sleep(calm)
		switch kind := kinds[rnd.IntN(len(kinds))]; kind {
		case "stall", "lag":
			ft.stall(rnd, kind == "stall")
		case "storm":
			rig := &faultRig{h: ft.h, rnd: rnd, srvs: []*redistest.Server{ft.srvs[ft.master]}, pxs: pxs, skip: skip}
			for storm := time.Now().Add(randIn(rnd, time.Second, 2*time.Second)); time.Now().Before(storm) && time.Now().Before(end); {
				rig.one(ft.t)
				time.Sleep(randIn(rnd, 0, 200*time.Millisecond))
			}
		default:
			ft.failover(kind, rnd, ft.h.now(), -1)
		}
	}
}

// stall stops the replica (SIGSTOP) and cuts its link right after it acknowledged an acquisition
// (the first long hold to return within the next two seconds, with a TTL of 700 ms to a second,
// by a client with WithReplicaAck if there are any: see target), for that
// acquisition's TTL and a bit more, while its holder keeps renewing on the master. Then either the
// master dies and the stalled replica is promoted with its old copy (promote), or it resumes and
// catches up. The link is cut, not only the process stopped: a stopped process's kernel would
// buffer what the master sends and hand it over on SIGCONT, which a replica behind a partition (or
// dropped by its master after repl-timeout) never gets.
func (ft *failoverTopo) stall(rnd *rand.Rand, promote bool) {
	d := randIn(rnd, 300*time.Millisecond, time.Second)
	extra := randIn(rnd, 50*time.Millisecond, 300*time.Millisecond)
	late := -1
	if hd, ok := ft.h.justAcquired(2*time.Second, ft.target); ok {
		d, late = hd.TTL+extra, hd.Client
	}
	from := ft.h.now()
	rep := ft.replica()
	ft.srvs[rep].Pause(ft.t)
	ft.link[ft.master].Set("")
	time.Sleep(d)
	if promote {
		ft.failover("stall", rnd, from, late)
		return
	}
	ft.srvs[rep].Resume(ft.t)
	ft.link[ft.master].Set(ft.srvs[ft.master].Addr())
	to := ft.waitSynced()
	ft.h.addFault(span{Kind: "lag", Target: -1, From: from, To: to, Detail: "replica stalled " + d.Round(time.Millisecond).String()})
}

// failover takes the master down (killed, or stopped: kind "stop"), promotes the replica after up
// to 100 ms, moves the clients' paths to it — all at once, or one by one over up to 400 ms — and
// brings the old master back as its replica. Client late (-1: none), the holder a stall was aimed
// at, learns of the new master last, 200–800 ms after the promotion, as a Sentinel client that
// missed +switch-master does: its holds' renewals fail until then.
func (ft *failoverTopo) failover(kind string, rnd *rand.Rand, from time.Duration, late int) {
	t := ft.t
	old, rep := ft.master, ft.replica()
	f := failover{Kind: kind, From: from, Down: ft.h.now()}
	if kind == "stop" {
		ft.srvs[old].Pause(t)
	} else {
		ft.srvs[old].Kill(t)
	}
	ft.link[old].Set("")
	if kind == "stall" {
		ft.srvs[rep].Resume(t)
	}
	time.Sleep(randIn(rnd, 0, 100*time.Millisecond)) // the time a failover takes to decide
	f.Promote = ft.h.now()
	ft.srvs[rep].Do(t, "REPLICAOF", "NO", "ONE")
	ft.master = rep
	addr := ft.srvs[rep].Addr()
	ft.admin.Set(addr)
	delays := make([]time.Duration, len(ft.paths))
	together := rnd.IntN(2) == 0
	for i := range delays {
		if d := randIn(rnd, 0, 400*time.Millisecond); !together {
			delays[i] = d
		}
	}
	if d := randIn(rnd, 200*time.Millisecond, 800*time.Millisecond); late >= 0 {
		delays[late] = d
	}
	order := rnd.Perm(len(ft.paths))
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(delays[a], delays[b]) })
	f.Switch = make([]time.Duration, len(ft.paths))
	start := time.Now()
	for _, i := range order {
		time.Sleep(time.Until(start.Add(delays[i])))
		ft.paths[i].Set(addr)
		f.Switch[i] = ft.h.now()
	}
	if kind == "stop" {
		ft.srvs[old].Resume(t) // it reaches nobody: every path has moved
	} else {
		ft.srvs[old].Restart(t) // empty: no persistence
	}
	ft.replicaOf(old, rep)
	ft.link[old].Set(ft.srvs[old].Addr())
	f.Synced = ft.waitSynced()
	ft.fos = append(ft.fos, f)
	how := "clients switched together"
	if !together {
		how = fmt.Sprintf("clients switched over %v", ms(f.Switch[order[len(order)-1]]-f.Promote))
	}
	if late >= 0 {
		how += fmt.Sprintf(", the holder's client %d %v after the promotion", late, ms(f.Switch[late]-f.Promote))
	}
	ft.h.addFault(span{Kind: "failover-" + kind, Target: -1, From: f.From, To: f.Synced,
		Detail: fmt.Sprintf("down %v, promoted %v, %s", ms(f.Down), ms(f.Promote), how)})
}

// target reports whether a stall should follow the acquisition of hd: a long hold (holdLong: a
// lock or a permit) with a TTL of 700 ms to a second (its renewal interval gives another owner time
// to come in after the promotion), by a client with WithReplicaAck if any client has it.
func (ft *failoverTopo) target(hd hold) bool {
	if hd.Kind != "long" || hd.TTL < 700*time.Millisecond || hd.TTL > time.Second || hd.End != 0 {
		return false
	}
	return !slices.Contains(ft.acked, true) || ft.acked[hd.Client]
}

// justAcquired waits up to d for an acquisition that pred accepts to return, and returns its hold.
func (h *history) justAcquired(d time.Duration, pred func(hold) bool) (hold, bool) {
	seen := func() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.calls) }
	from := seen()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		h.mu.Lock()
		calls := slices.Clone(h.calls[from:])
		h.mu.Unlock()
		from += len(calls)
		for _, c := range calls {
			c.mu.Lock()
			hd := *c.hold
			c.mu.Unlock()
			if pred(hd) {
				return hd, true
			}
		}
	}
	return hold{}, false
}

package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/redis/go-redis/v9"
)

// RenewChunk is the most locks one renew_many.lua call renews unless Config.RenewChunk says
// otherwise. A script blocks the server while it runs (2 to 4 µs per lock on a 2-core VM): chunks
// keep a foreground command from waiting behind a whole batch (100 locks: about an idle round
// trip), while the call's own cost is shared. A watchdog batch goes in one pipeline of them.
const RenewChunk = 100

// errRenewReply is a renewal reply of an unexpected shape.
var errRenewReply = errors.New("unexpected renew reply")

// renewSend is one script call of a renewal round: renew_many.lua for several locks (of one slot
// on a cluster), or renew.lua or sem_renew.lua for one item. It renews items[order[lo:hi]].
// (Node.acked sends its one call as one too, without a connection of its own.)
type renewSend struct {
	call   script.Call
	cmd    *redis.Cmd
	lo, hi int
	many   bool
}

// renewBufs are a renewal round's buffers, reused from round to round (Node.renewBufs): a round of
// a thousand renewals would otherwise allocate about 90 KB more.
type renewBufs struct {
	sends []renewSend
	order []int    // the items, as the sends take them
	slots []uint16 // by item, on a cluster
	keys  []string // renew_many.lua's keys, in order
	pre   []byte   // their owner checks' prefixes, one after the other
	pres  []string // each key's prefix
	args  []any    // each call's arguments: its TTL, then the prefixes (*string)
	argv  []any    // the command lines of the renew_many.lua calls
}

// renewPlan splits items into the round's script calls: the plain locks in renew_many.lua calls of
// at most n.renewChunk locks of one TTL (on a cluster, of one slot), a lone lock too (one renewal
// path for every plain lock the watchdog keeps: the one the safety checker exercises), and each
// permit or read-write lease with sem_renew.lua.
func (n *Node) renewPlan(b *renewBufs, items []RenewItem) {
	b.order, b.sends = b.order[:0], b.sends[:0]
	for i := range items {
		if !batchable(&items[i]) {
			b.sends = append(b.sends, renewSend{lo: len(b.order), hi: len(b.order) + 1})
			b.order = append(b.order, i)
		}
	}
	plain := len(b.order)
	for i := range items {
		if batchable(&items[i]) {
			b.order = append(b.order, i)
		}
	}

	locks := b.order[plain:]
	if n.cluster {
		b.slots = slices.Grow(b.slots[:0], len(items))[:len(items)]
		for _, i := range locks {
			b.slots[i] = Slot(items[i].K.Main)
		}
	}
	apart := func(x, y int) int { // calls group locks by slot (on a cluster), then TTL
		if n.cluster {
			if c := cmp.Compare(b.slots[x], b.slots[y]); c != 0 {
				return c
			}
		}
		return cmp.Compare(items[x].TTL, items[y].TTL)
	}
	if !slices.IsSortedFunc(locks, apart) {
		slices.SortStableFunc(locks, apart)
	}

	for lo := 0; lo < len(locks); {
		hi := min(lo+n.renewChunk, len(locks))
		for j := lo + 1; j < hi; j++ {
			if apart(locks[lo], locks[j]) != 0 {
				hi = j
				break
			}
		}
		b.sends = append(b.sends, renewSend{lo: plain + lo, hi: plain + hi, many: true})
		lo = hi
	}
}

// batchable reports whether renew_many.lua can renew it: a plain lock's, with a string token.
func batchable(it *RenewItem) bool {
	_, ok := it.Token.(string)
	return ok && it.K.Sem == nil
}

// renewCalls builds the round's calls: renew_many.lua's in b's buffers, the others with renewCall.
func (n *Node) renewCalls(b *renewBufs, items []RenewItem) {
	// The owner checks' prefixes, token NUL (fence NUL), in one string for the round.
	var calls, locks int
	b.pre = b.pre[:0]
	for _, s := range b.sends {
		if !s.many {
			continue
		}
		calls++
		locks += s.hi - s.lo
		for _, i := range b.order[s.lo:s.hi] {
			b.pre = append(append(b.pre, items[i].Token.(string)...), 0)
			if n.Fenced {
				b.pre = append(strconv.AppendInt(b.pre, items[i].K.Fence, 10), 0)
			}
		}
	}
	pre := string(b.pre)

	// Grown once, before any call refers to them: each call sends its keys and prefixes in place.
	need := 4*calls + 2*locks
	b.argv = slices.Grow(b.argv[:0], need)[:need]
	b.keys = slices.Grow(b.keys[:0], locks)
	b.pres = slices.Grow(b.pres[:0], locks)
	b.args = slices.Grow(b.args[:0], calls+locks)
	at, off := 0, 0
	for j := range b.sends {
		s := &b.sends[j]
		if !s.many {
			s.call = n.renewCall(&items[b.order[s.lo]])
			continue
		}
		k0, a0 := len(b.keys), len(b.args)
		b.args = append(b.args, MS(items[b.order[s.lo]].TTL))
		for _, i := range b.order[s.lo:s.hi] {
			it := &items[i]
			end := at + len(it.Token.(string)) + 1
			if n.Fenced {
				end = strings.IndexByte(pre[end:], 0) + end + 1
			}
			b.keys = append(b.keys, it.K.Main)
			b.pres = append(b.pres, pre[at:end])
			b.args = append(b.args, &b.pres[len(b.pres)-1]) // a *string: no allocation
			at = end
		}
		size := 4 + 2*(s.hi-s.lo)
		rm := script.RenewMany{Locks: b.keys[k0:], Items: b.args[a0:]}
		s.call = rm.CallIn(b.argv[off : off : off+size])
		off += size
	}
}

// release clears b's references (to the items' keys and tokens) and returns it to pool.
func (b *renewBufs) release(pool *sync.Pool) {
	clear(b.sends)
	clear(b.keys)
	clear(b.pres)
	clear(b.args)
	clear(b.argv)
	pool.Put(b)
}

// renewVia sends the renewals of items (pipelined) and fills in their outcomes; it fails when
// every one did. With wait, it returns the last WAIT.
func (n *Node) renewVia(ctx context.Context, newPipe func() redis.Pipeliner, items []RenewItem, wait bool) (*redis.IntCmd, error) {
	b := n.renewBufs.Get().(*renewBufs)
	defer b.release(&n.renewBufs)
	n.renewPlan(b, items)
	n.renewCalls(b, items)
	w, err := n.pipelined(ctx, newPipe, b.sends, wait)

	failed := 0
	for j := range b.sends {
		failed += b.sends[j].outcomes(items, b.order)
	}
	if failed < len(items) {
		return w, nil
	}
	return w, err
}

// pipelined sends the calls of sends in a pipeline of newPipe's (those whose script the server
// lacked again, as EVAL, in a second) and sets their cmd. With wait, each pipeline ends with WAIT
// (see Node.acked), and the last WAIT is returned.
func (n *Node) pipelined(ctx context.Context, newPipe func() redis.Pipeliner, sends []renewSend, wait bool) (*redis.IntCmd, error) {
	var w *redis.IntCmd
	exec := func(p redis.Pipeliner) error {
		if wait {
			w = redis.NewIntCmd(ctx, "WAIT", n.replicas, MS(n.replicaWait))
			_ = p.Process(ctx, w)
		}
		_, err := p.Exec(ctx)
		return err
	}

	p := newPipe()
	for j := range sends {
		s := &sends[j]
		s.cmd = s.call.Cmd(ctx, n.send)
		_ = p.Process(ctx, s.cmd)
	}
	err := exec(p)

	var again redis.Pipeliner
	for j := range sends {
		s := &sends[j]
		if script.IsNoScript(s.cmd.Err()) {
			if again == nil {
				again = newPipe()
			}
			s.cmd = s.call.Eval(ctx)
			_ = again.Process(ctx, s.cmd)
		}
	}
	if again != nil {
		err = exec(again)
	}
	return w, err
}

// outcomes fills in the outcome of each item s renewed and returns how many failed.
func (s *renewSend) outcomes(items []RenewItem, order []int) (failed int) {
	idx := order[s.lo:s.hi]
	v, err := s.cmd.Result()
	// renew.lua and sem_renew.lua answer 1 (renewed) or 0; renew_many.lua the number of locks when
	// every one renewed, else one reply per lock.
	if n, ok := v.(int64); ok && err == nil && (!s.many || n == int64(len(idx))) {
		for _, i := range idx {
			items[i].OK, items[i].Err = n == int64(len(idx)), nil
		}
		return 0
	}
	vals, ok := v.([]any)
	if err == nil && (!ok || len(vals) != len(idx)) {
		err = errRenewReply
	}

	for j, i := range idx {
		it := &items[i]
		it.OK, it.Err = false, err
		if err == nil {
			switch v := vals[j].(type) {
			case int64:
				it.OK = v == 1
			case error:
				it.Err = v
			default:
				it.Err = errRenewReply
			}
		}
		if it.Err != nil {
			failed++
		}
	}
	return failed
}

// Slot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag, modulo 16384.
func Slot(key string) uint16 {
	tag := HashTag(key)
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

package store

import (
	"context"
	"sync"
	"time"
)

// inlineNodes is how many nodes the per-call state of a fan-out holds without allocating.
const inlineNodes = 5

// fanJob is the per-node work of a fan-out: call keeps each answer aside (in the fan's own), and
// the fan publishes it if it came while the caller waited, so that the caller reads answers
// without racing a straggler.
type fanJob interface {
	// call runs the request on node i, in a worker, and reports whether it counts toward need.
	call(ctx context.Context, i int) bool
	// late runs in node i's goroutine when the node answered after the caller stopped waiting.
	late(i int)
}

// fan is the state one fanned-out request shares between its caller and the nodes' goroutines,
// with the nodes' answers: own, written by the nodes' goroutines; got, read once the wait ended:
// those kept in time, errNodeTimeout for the others. It is embedded in the request's own state,
// so that a call costs one allocation for both.
type fan[T any] struct {
	mu     sync.Mutex
	rl     *Redlock
	job    fanJob // the request (the state that embeds the fan)
	left   int    // goroutines still running
	good   int    // answers that counted toward need
	need   int
	gaveUp bool               // the caller stopped waiting
	enough chan struct{}      // closed when need answers counted, or every node answered
	cancel context.CancelFunc // of the nodes' context: called by the last node to answer
	began  time.Time          // the requests' start, for the nodes' round-trip estimates

	own, got []answer[T]
	buf      [2 * inlineNodes]answer[T]
	// fn is each's request (rlAcquire and rlRelease have a call of their own).
	fn func(ctx context.Context, i int, n *Node) (T, error)
}

// start runs job on every node of rl, on workers with ctx; enough closes once need calls said true.
func (f *fan[T]) start(ctx context.Context, rl *Redlock, cancel context.CancelFunc, need int, job fanJob) {
	nodes := len(rl.nodes)
	if need <= 0 || need > nodes {
		need = nodes + 1 // never reached: wait for every node
	}
	f.rl, f.job, f.left, f.need, f.cancel = rl, job, nodes, need, cancel
	f.enough = make(chan struct{})
	f.began = time.Now()
	s := f.buf[:]
	if nodes > inlineNodes {
		s = make([]answer[T], 2*nodes)
	}
	f.own, f.got = s[:nodes], s[nodes:2*nodes]
	for i := range f.got {
		f.got[i].err = errNodeTimeout
	}

	for i := range nodes {
		rl.work.run(task{f: f, ctx: ctx, i: i})
	}
}

// node runs the job on node i, in a worker, and publishes its answer if the caller still waits.
func (f *fan[T]) node(ctx context.Context, i int) {
	ok := f.job.call(ctx, i)
	f.measure(ctx, i)

	f.mu.Lock()
	tooLate := f.gaveUp
	if !tooLate {
		f.got[i] = f.own[i]
		if ok {
			f.good++
		}
	}
	f.left--
	last := f.left == 0
	// Closed once: when this answer reached need, or else by the last answer.
	if (ok && !tooLate && f.good == f.need) || (last && f.good < f.need) {
		close(f.enough)
	}
	f.mu.Unlock()

	if last {
		f.cancel() // every node answered: the context has no more use
	}
	if tooLate {
		f.job.late(i)
	}
}

// stop ends the caller's wait (later answers are late) and returns how many nodes had not answered.
func (f *fan[T]) stop() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gaveUp = true
	return f.left
}

// within runs job on every node of rl with one context, ctx bounded by t, waits until f says
// enough or that context ends, and returns how many nodes had not answered. The context is
// cancelled when the wait times out (stragglers are abandoned), or else by the last node to
// answer; the wait honours its deadline even where go-redis does not (ContextTimeoutEnabled false).
func (f *fan[T]) within(ctx context.Context, rl *Redlock, t time.Duration, need int, job fanJob) int {
	nctx, cancel := context.WithTimeout(ctx, t)
	f.start(nctx, rl, cancel, need, job)
	select {
	case <-f.enough:
	case <-nctx.Done():
		cancel()
	}
	return f.stop()
}

// fanNode is a fan as a worker sees it: node runs the request on node i.
type fanNode interface {
	node(ctx context.Context, i int)
}

// answer is one node's answer to a fanned-out request.
type answer[T any] struct {
	v   T
	err error
}

func (f *fan[T]) call(ctx context.Context, i int) bool {
	g := &f.own[i]
	g.v, g.err = f.fn(ctx, i, f.rl.nodes[i])
	return g.err == nil
}

// late does nothing with a late answer (rlAcquire's does).
func (f *fan[T]) late(int) {}

// each runs fn on every node in parallel and returns their answers, errNodeTimeout for a node that
// did not answer within t (see within). With need > 0 it returns once need nodes answered
// without error (a quorum that settles the outcome), so that the slowest node does not set the
// latency; the other calls go on in the background, to their end or t.
func each[T any](ctx context.Context, rl *Redlock, t time.Duration, need int,
	fn func(ctx context.Context, i int, n *Node) (T, error)) []answer[T] {
	j := &fan[T]{fn: fn}
	j.within(ctx, rl, t, need, j)
	return j.got
}

// workers run the node requests of fan-outs, each on an idle worker or a new one. A worker exits
// once idle for one to two workerIdle periods, or idle after stop. Reusing goroutines spares each
// request a goroutine start and a fresh stack's growth to the depth of a go-redis call.
type workers struct {
	tasks chan task // unbuffered: a send succeeds when a worker waits
	done  chan struct{}
	once  sync.Once
}

// workerIdle is the period after which a worker that had no request in it exits.
const workerIdle = time.Second

// task is one node's request of a fan-out.
type task struct {
	f   fanNode
	ctx context.Context
	i   int
}

// run hands t to an idle worker, or starts one; it never blocks.
func (w *workers) run(t task) {
	select {
	case w.tasks <- t:
	default:
		go w.work(t)
	}
}

func (w *workers) work(t task) {
	// A ticker: a timer reset per request would cost an update per node and request.
	idle := time.NewTicker(workerIdle)
	defer idle.Stop()
	worked := false
	for {
		if t.f != nil {
			t.f.node(t.ctx, t.i)
			t, worked = task{}, true // keep nothing of the request alive while idle
		}
		select {
		case t = <-w.tasks:
		case <-idle.C:
			if !worked {
				return
			}
			worked = false
		case <-w.done:
			return
		}
	}
}

// stop makes idle workers exit, and busy ones once their request is done (Client.Close). Requests
// made afterwards still run, each on a goroutine that exits after it.
func (w *workers) stop() { w.once.Do(func() { close(w.done) }) }

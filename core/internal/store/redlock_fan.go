package store

import (
	"context"
	"sync"
	"time"
)

// The Redlock fan-out: one request per node in parallel, bounded by the per-node timeout, and
// returning early once enough nodes have settled the outcome.

// settle returns copies of per-node results in which nodes that did not answer in time count as
// failed. (Their goroutines may still write the originals.)
func settle[T any](answered []bool, vals []T, errs []error) ([]T, []error) {
	v := make([]T, len(vals))
	e := make([]error, len(errs))
	for i := range answered {
		if answered[i] {
			v[i], e[i] = vals[i], errs[i]
		} else {
			e[i] = errNodeTimeout
		}
	}
	return v, e
}

// inlineNodes is how many nodes the per-call state of a fan-out holds without allocating.
const inlineNodes = 5

// fanJob is the per-node work of one fanned-out request. Each node's answer is kept aside by
// call (in the node's goroutine) and published by keep only if it came while the caller waited,
// so that the caller reads the answers without copying them and without racing a straggler.
type fanJob interface {
	// call runs the request on node i, in a goroutine of its own, and reports whether the node
	// counts toward the number of nodes the wait may stop at.
	call(ctx context.Context, i int) bool
	// keep publishes node i's answer; it runs under the fan's lock while the caller still waits.
	keep(i int)
	// late runs in node i's goroutine when the node answered after the caller stopped waiting.
	late(i int)
}

// fan is the state one fanned-out request shares between its caller and the nodes' goroutines.
// It is embedded in the request's own state, so that a call costs one allocation for both.
type fan struct {
	mu       sync.Mutex
	answered []bool // nodes whose answer was kept; not written once the caller stopped waiting
	left     int    // goroutines still running
	good     int    // answers that counted toward need
	need     int
	gaveUp   bool // the caller stopped waiting
	signaled bool
	enough   chan struct{}      // closed when need answers counted, or every node answered
	cancel   context.CancelFunc // of the nodes' context: called by the last node to answer
	rtts     []rtt              // the nodes' round-trip estimates, each request's time added
	began    time.Time
	ans      [inlineNodes]bool
}

// start runs job on every node of rl, each on a worker with ctx, and returns at once. need > 0
// closes enough as soon as need calls reported true.
func (f *fan) start(rl *Redlock, ctx context.Context, cancel context.CancelFunc, need int, job fanJob) {
	w, nodes := rl.work, len(rl.nodes)
	if rl.timeout == 0 { // (WithNodeTimeout: no estimate needed)
		f.rtts, f.began = rl.rtts, time.Now()
	}
	if nodes <= inlineNodes {
		f.answered = f.ans[:nodes]
	} else {
		f.answered = make([]bool, nodes)
	}
	if need <= 0 || need > nodes {
		need = nodes + 1 // never reached: wait for every node
	}
	f.left, f.need, f.cancel = nodes, need, cancel
	f.enough = make(chan struct{})
	for i := range nodes {
		w.run(task{f: f, ctx: ctx, i: i, job: job})
	}
}

func (f *fan) node(ctx context.Context, i int, job fanJob) {
	ok := job.call(ctx, i)
	f.measure(ctx, i)
	f.mu.Lock()
	tooLate := f.gaveUp
	if !tooLate {
		job.keep(i)
		f.answered[i] = true
		if ok {
			f.good++
		}
	}
	f.left--
	last := f.left == 0
	if !f.signaled && ((!tooLate && f.good == f.need) || last) {
		f.signaled = true
		close(f.enough)
	}
	f.mu.Unlock()
	if last && f.cancel != nil {
		f.cancel() // every node answered: the context has no more use
	}
	if tooLate {
		job.late(i)
	}
}

// stop ends the caller's wait: from now on answers are late, and answered (returned) is the
// caller's to read.
func (f *fan) stop() []bool {
	f.mu.Lock()
	f.gaveUp = true
	f.mu.Unlock()
	return f.answered
}

// wait waits for f's signal, the timer (nil: none) or ctx, and reports whether the signal came.
func (rl *Redlock) wait(ctx context.Context, f *fan, t *time.Timer) bool {
	var timeout <-chan time.Time
	if t != nil {
		timeout = t.C
	}
	select {
	case <-f.enough:
		return true
	case <-timeout:
	case <-ctx.Done():
	}
	return false
}

// timer returns a stopped timer from the Client's pool, set to fire after d.
func (rl *Redlock) timer(d time.Duration) *time.Timer {
	if t, ok := rl.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and returns it to the pool. (Since Go 1.23 a stopped or reset timer delivers
// no stale value.)
func (rl *Redlock) putTimer(t *time.Timer) {
	t.Stop()
	rl.timers.Put(t)
}

// fan runs fn on every node in parallel, each with the per-node timeout, and returns which nodes
// answered within it. It does not wait longer even if a go-redis client ignores context deadlines
// on its sockets (ContextTimeoutEnabled false): fn's result for a node that answers later is not
// counted, and late(i), if not nil, runs after it instead (e.g. to undo a late acquisition).
//
// With need > 0 it also stops waiting once need calls of fn returned true (a quorum that settles
// the outcome), so that the slowest node does not set the latency. The other calls go on in the
// background, to their end or the per-node timeout, and count as late.
func (rl *Redlock) fan(ctx context.Context, ttl time.Duration, need int, fn func(ctx context.Context, i int, n *Node) bool, late func(i int)) []bool {
	return rl.fanFor(ctx, rl.nodeTimeout(ttl), need, fn, late)
}

func (rl *Redlock) fanFor(ctx context.Context, t time.Duration, need int, fn func(ctx context.Context, i int, n *Node) bool, late func(i int)) []bool {
	j := &funcJob{rl: rl, fn: fn, lateFn: late}
	return rl.fanWithin(ctx, t, need, &j.fan, j)
}

// fanWithin runs job on every node with one context, ctx bounded by t, and waits until f says
// enough or that context ends. The context is cancelled when the wait times out (stragglers are
// abandoned: their requests may as well stop), or else by the last node to answer. One deadline
// for every node: go-redis honours it on sockets with ContextTimeoutEnabled; the wait honours it
// regardless.
func (rl *Redlock) fanWithin(ctx context.Context, t time.Duration, need int, f *fan, job fanJob) []bool {
	nctx, cancel := context.WithTimeout(ctx, t)
	f.start(rl, nctx, cancel, need, job)
	if !rl.wait(nctx, f, nil) {
		cancel()
	}
	return f.stop()
}

// funcJob adapts a function to fanJob (the operations off the lock+unlock path); fn writes its
// answers where its caller reads them through settle.
type funcJob struct {
	fan
	rl     *Redlock
	fn     func(ctx context.Context, i int, n *Node) bool
	lateFn func(i int)
}

func (j *funcJob) call(ctx context.Context, i int) bool { return j.fn(ctx, i, j.rl.nodes[i]) }
func (j *funcJob) keep(int)                             {}
func (j *funcJob) late(i int) {
	if j.lateFn != nil {
		j.lateFn(i)
	}
}

// workers run the node requests of fan-outs. A request goes to an idle worker, or to a new one
// when none is idle; a worker exits once idle for one to two workerIdle periods, or idle after
// stop. Reusing
// goroutines spares each request a goroutine start and the growth of a fresh goroutine's stack to
// the depth of a go-redis call.
type workers struct {
	tasks chan task // unbuffered: a send succeeds when a worker waits
	done  chan struct{}
	once  sync.Once
}

// workerIdle is the period after which a worker that had no request in it exits.
const workerIdle = time.Second

// task is one node's request of a fan-out.
type task struct {
	f   *fan
	ctx context.Context
	i   int
	job fanJob
}

func newWorkers() *workers {
	return &workers{tasks: make(chan task), done: make(chan struct{})}
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
	// The idle timer is not reset per request (that would cost a timer update per node and
	// request): a worker exits when a whole period passed without work, after one to two idle
	// periods.
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	worked := false
	for {
		if t.f != nil {
			t.f.node(t.ctx, t.i, t.job)
			t, worked = task{}, true // keep nothing of the request alive while idle
		}
		select {
		case t = <-w.tasks:
		case <-idle.C:
			if !worked {
				return
			}
			worked = false
			idle.Reset(workerIdle)
		case <-w.done:
			return
		}
	}
}

// stop makes idle workers exit, and busy ones once their request is done (Client.Close). Requests
// made afterwards still run, each on a goroutine that exits after it.
func (w *workers) stop() { w.once.Do(func() { close(w.done) }) }

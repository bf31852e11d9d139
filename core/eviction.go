package core

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lockkit/lockkit/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// A volatile-* eviction policy (the managed services' default) evicts exactly the keys with a TTL,
// as every lock key is: an evicted lock can be taken by another caller before its holder learns it.
// The eviction check reads INFO on every master the Client writes to and warns once per master
// that may evict. It starts with the Client's first acquisition, in the background, and looks
// again every evictionEvery for masters not checked (a failover promotes another run_id). A server
// that denies INFO (the ACL of docs/security.md) is said once, at Info level, and the check stops.

// evictionEvery is how often the eviction check looks for masters it has not checked.
const evictionEvery = time.Minute

// evictionTimeout bounds each round of the check.
const evictionTimeout = 5 * time.Second

// maxChecked caps the run_ids the check remembers; past it, it forgets them (and may warn again).
const maxChecked = 1024

// evictionCheck is a Client's eviction check (see above).
type evictionCheck struct {
	nodes []redis.UniversalClient
	log   func(level slog.Level, msg string, attrs ...slog.Attr)
	every time.Duration

	started sync.Once       // starts the check, or (by close first) keeps it from starting
	ctx     context.Context // the check's: close ends it
	stop    context.CancelFunc
	done    chan struct{} // closed when the check has ended (or, closed first, never started)

	mu      sync.Mutex
	checked map[string]bool // run_ids checked
	denied  bool            // a server denied INFO (said once; the check stops)
	quiet   bool            // an error other than a denial was said (at Debug level) once
}

func newEvictionCheck(nodes []redis.UniversalClient, log func(slog.Level, string, ...slog.Attr)) *evictionCheck {
	e := &evictionCheck{nodes: nodes, log: log, every: evictionEvery, done: make(chan struct{}),
		checked: map[string]bool{}}
	e.ctx, e.stop = context.WithCancel(context.Background())
	return e
}

// start starts the check unless it is running or stopped.
func (e *evictionCheck) start() {
	e.started.Do(func() { go e.run() })
}

// close stops the check and waits for it.
func (e *evictionCheck) close() {
	e.stop()
	e.started.Do(func() { close(e.done) }) // (never started: nothing to wait for)
	<-e.done
}

func (e *evictionCheck) run() {
	defer close(e.done)
	for e.round(e.ctx) {
		select {
		case <-e.ctx.Done():
			return
		case <-time.After(e.every):
		}
	}
}

// round checks every master not checked yet, and reports whether to go on (INFO was not denied).
func (e *evictionCheck) round(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, evictionTimeout)
	defer cancel()
	for _, n := range e.nodes {
		if cl, ok := n.(*redis.ClusterClient); ok {
			_ = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				e.node(ctx, m, nodeName(m))
				return nil
			})
			continue
		}
		e.node(ctx, n, nodeName(n))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.denied
}

// node checks the server rdb reaches, named name.
func (e *evictionCheck) node(ctx context.Context, rdb redis.Cmdable, name string) {
	server, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		e.failed(name, err)
		return
	}

	srv := redisinfo.Parse(server)
	id := srv["run_id"]
	e.mu.Lock()
	done := e.checked[id]
	e.mu.Unlock()
	if done && id != "" {
		return
	}

	mem, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		e.failed(name, err)
		return
	}

	ev := redisinfo.EvictionOf(redisinfo.Parse(mem))
	e.mu.Lock()
	if len(e.checked) >= maxChecked {
		clear(e.checked)
	}
	e.checked[id] = true
	e.mu.Unlock()

	if name == "FailoverClient" {
		name = "the Sentinel master (port " + srv["tcp_port"] + ")"
	}
	if ev.Evicts() {
		e.log(slog.LevelWarn, "Redis may evict lock keys: a lock whose key is evicted is lost, and another caller can take it before its holder learns it",
			slog.String("node", name), slog.String("maxmemory-policy", ev.Policy), slog.Int64("maxmemory", ev.MaxMemory),
			slog.String("fix", ev.Fix()))
	}
}

// failed says why a server could not be checked: once for a denial of INFO (the check then
// stops), once at Debug level for any other error but an ended context (it is asked again).
func (e *evictionCheck) failed(name string, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return // (Close, or a round that took too long: asked again later)
	}
	level, said := slog.LevelDebug, &e.quiet
	msg := "eviction check: a server could not be asked; it is asked again later"
	if strings.HasPrefix(err.Error(), "NOPERM") {
		level, said = slog.LevelInfo, &e.denied
		msg = "eviction check skipped: this user may not run INFO (grant +info to have it, or run lockkit doctor)"
	}

	e.mu.Lock()
	say := !*said
	*said = true
	e.mu.Unlock()
	if say {
		e.log(level, msg, slog.String("node", name), slog.Any("error", err))
	}
}

// nodeName names a server for a log line: its address.
func nodeName(n redis.UniversalClient) string {
	if c, ok := n.(interface{ Options() *redis.Options }); ok {
		return c.Options().Addr
	}
	return "a Redis server"
}

// Command httpidempotency is a small orders API whose POST /orders is made exactly-once by
// httpmw.Idempotency: retry it with the same Idempotency-Key and you get the same order back,
// replayed, from whichever replica you ask. See README.md for curl lines.
//
// It uses the Redis at -redis, or an embedded one (miniredis, with TTLs that count down) when the
// flag is empty.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	redisAddr := flag.String("redis", os.Getenv("REDIS_ADDR"), "address of a real Redis (embedded when empty)")
	delay := flag.Duration("delay", 2*time.Second, "how long creating an order takes (to see a 409)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *redisAddr, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "httpidempotency:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, redisAddr string, delay time.Duration) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if redisAddr == "" {
		embedded, err := lockkittest.StartServer()
		if err != nil {
			return err
		}
		defer embedded.Close()
		redisAddr = embedded.Addr()
		log.Info("embedded Redis", "addr", redisAddr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DisableIdentity: true})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = locks.Close(cctx)
	}()

	s := &store{orders: map[string]order{}, delay: delay}
	// The middleware hashes the whole request body into the request's fingerprint, so it bounds what
	// it reads itself: set the limit to what the route accepts (the handler reads at most 64 KiB),
	// and a larger body gets 413 before the handler runs.
	idem := httpmw.Idempotency(locks, httpmw.RequireKey(), httpmw.WithMaxRequestBody(1<<16), httpmw.WithLogger(log))
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idem(http.HandlerFunc(s.create)))
	mux.HandleFunc("GET /orders/{id}", s.get)

	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("orders API", "addr", addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type order struct {
	ID       string    `json:"id"`
	Item     string    `json:"item"`
	Quantity int       `json:"quantity"`
	Created  time.Time `json:"created"`
}

// store keeps orders in memory: the side effect the middleware makes happen once per key.
type store struct {
	mu     sync.Mutex
	orders map[string]order
	next   int
	delay  time.Duration
}

func (s *store) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Item     string `json:"item"`
		Quantity int    `json:"quantity"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&in); err != nil || in.Item == "" || in.Quantity < 1 {
		jsonError(w, `send {"item": "...", "quantity": n>0}`, http.StatusBadRequest)
		return
	}
	select { // the work; r.Context() is the idempotency lock's context
	case <-time.After(s.delay):
	case <-r.Context().Done():
		jsonError(w, "cancelled", http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	s.next++
	o := order{ID: "ord_" + strconv.Itoa(s.next), Item: in.Item, Quantity: in.Quantity, Created: time.Now().UTC()}
	s.orders[o.ID] = o
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/"+o.ID)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(o)
}

func (s *store) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	o, ok := s.orders[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		jsonError(w, "no such order", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o)
}

func jsonError(w http.ResponseWriter, msg string, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

package httpmw_test

import (
	"bufio"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// TestIdempotency_streaming shows flushes and http.ResponseController reaching the client through
// the middleware, and a streamed response that fits the limit being stored.
func TestIdempotency_streaming(t *testing.T) {
	_, locks := setup(t)
	var calls atomic.Int64
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
			http.Error(w, "deadline: "+err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
		w.(http.Flusher).Flush()
	})
	url := serve(t, httpmw.Idempotency(locks)(h)).URL
	req, _ := http.NewRequest("POST", url, nil)
	req.Header.Set("Idempotency-Key", "stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	line, err := br.ReadString('\n') // arrives while the handler is still running
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q %v", line, err)
	}
	close(next)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q", rest)
	}
	r := send(t, "POST", url, "stream", "")
	if r.body != "data: one\n\ndata: two\n\n" || r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
		t.Fatalf("streamed response not replayed: %+v calls %d", r, calls.Load())
	}
}

func TestIdempotency_hijackedNotStored(t *testing.T) {
	_, locks := setup(t)
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		brw.Flush()
	})
	url := serve(t, httpmw.Idempotency(locks)(h)).URL
	if r := send(t, "POST", url, "k", ""); r.body != "hi" {
		t.Fatalf("%+v", r)
	}
	// The client may read the hijacked response before the handler returns and the key is
	// released: until then a retry is a duplicate in flight.
	locktest.Eventually(t, 5*time.Second, "the key to be released", func() bool {
		return send(t, "POST", url, "k", "").status != http.StatusConflict
	})
	if calls.Load() != 2 {
		t.Fatalf("a hijacked response was stored: calls %d", calls.Load())
	}
}

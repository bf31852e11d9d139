package httpmw

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// recorder passes a response through to the client while keeping a copy of it in the record format
// (see record.go), up to a body limit. The client gets every byte as the handler writes it, flushes
// included; the copy is what Idempotency stores once the handler returns.
//
// It implements http.Flusher, io.StringWriter and, for http.ResponseController, FlushError, Hijack
// and Unwrap, so streaming handlers, deadlines and full-duplex keep working. A flushed response is
// still stored if it fits the limit; a hijacked connection is never stored.
type recorder struct {
	w        http.ResponseWriter
	limit    int
	buf      []byte // the record: head from WriteHeader, then the body
	bodyAt   int    // len(buf) when the body started
	status   int    // final status; 0 until the header is written
	overflow bool   // the body outgrew the limit: not stored
	hijacked bool
}

func (rw *recorder) Header() http.Header { return rw.w.Header() }

func (rw *recorder) WriteHeader(code int) {
	if rw.status == 0 && !rw.hijacked && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		rw.start(code)
	}
	rw.w.WriteHeader(code)
}

// start begins the record with the final status and the headers as they are sent.
func (rw *recorder) start(code int) {
	rw.status = code
	if rw.buf == nil {
		rw.buf = make([]byte, 0, 512)
	}
	rw.buf = appendRecordHead(rw.buf, code, rw.w.Header())
	rw.bodyAt = len(rw.buf)
}

func (rw *recorder) Write(p []byte) (int, error) {
	if rw.status == 0 && !rw.hijacked {
		rw.WriteHeader(http.StatusOK)
	}
	rw.keep(len(p))
	if !rw.overflow {
		rw.buf = append(rw.buf, p...)
	}
	return rw.w.Write(p)
}

func (rw *recorder) WriteString(s string) (int, error) {
	if rw.status == 0 && !rw.hijacked {
		rw.WriteHeader(http.StatusOK)
	}
	rw.keep(len(s))
	if !rw.overflow {
		rw.buf = append(rw.buf, s...)
	}
	return io.WriteString(rw.w, s)
}

// keep checks that n more body bytes fit the limit; if not, the copy is dropped.
func (rw *recorder) keep(n int) {
	if !rw.overflow && len(rw.buf)-rw.bodyAt+n > rw.limit {
		rw.overflow = true
		rw.buf = nil
	}
}

// Flush sends what was written so far to the client.
func (rw *recorder) Flush() { _ = rw.FlushError() }

// FlushError is Flush for http.ResponseController, which reports whether flushing is supported.
func (rw *recorder) FlushError() error {
	if rw.status == 0 && !rw.hijacked {
		rw.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(rw.w).Flush()
}

// Hijack hands the connection to the handler; the response is then never stored.
func (rw *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(rw.w).Hijack()
	if err == nil {
		rw.hijacked = true
	}
	return c, brw, err
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.w }

package httpmw

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// problemBase is where the problem types are documented; each type is this plus "#" and a slug.
const problemBase = "https://github.com/lockkit/lockkit/blob/main/middleware/httpmw/problems.md"

// problem is an RFC 9457 problem type answered by the middlewares.
type problem struct {
	slug   string
	status int
	title  string
}

// The problems the middlewares answer with; documented in problems.md.
var (
	keyMalformed = problem{"idempotency-key-malformed", http.StatusBadRequest,
		"Malformed Idempotency-Key header"}
	keyMissing = problem{"idempotency-key-missing", http.StatusBadRequest,
		"Idempotency-Key header required"}
	keyInUse = problem{"idempotency-key-in-use", http.StatusConflict,
		"A request with this Idempotency-Key is being processed"}
	keyReused = problem{"idempotency-key-reused", http.StatusUnprocessableEntity,
		"Idempotency-Key reused with a different request"}
	recordBroken = problem{"idempotency-record-unreadable", http.StatusInternalServerError,
		"The stored response for this Idempotency-Key cannot be read"}
	handlerPanicked = problem{"handler-panicked", http.StatusInternalServerError,
		"The request failed"}
	lockUnavailable = problem{"lock-unavailable", http.StatusServiceUnavailable,
		"Lock service unavailable"}
	lockMisconfigured = problem{"lock-misconfigured", http.StatusInternalServerError,
		"Lock service misconfigured"}
	resourceLocked = problem{"resource-locked", http.StatusConflict,
		"The resource is locked by another request"}
	bodyTooLarge = problem{"request-body-too-large", http.StatusRequestEntityTooLarge,
		"Request body too large"}
	lockKeyInvalid = problem{"lock-key-invalid", http.StatusBadRequest,
		"Invalid lock key"}
	concurrencyLimit = problem{"concurrency-limit", http.StatusTooManyRequests,
		"Too many concurrent requests for this resource"}
)

type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// body returns the problem's JSON document, answered with status (its own status when 0).
func (p problem) body(status int, detail string) []byte {
	if status == 0 {
		status = p.status
	}
	b, _ := json.Marshal(problemBody{Type: problemBase + "#" + p.slug, Title: p.title, Status: status, Detail: detail})
	return b
}

// write answers the request with the problem, with status (its own status when 0).
func (p problem) write(w http.ResponseWriter, status int, detail string) {
	if status == 0 {
		status = p.status
	}
	b := p.body(status, detail)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// retryAfter sets Retry-After to d in whole seconds, rounded up, at least 1.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	s := int64(math.Ceil(d.Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(max(s, 1), 10))
}

// Package httpmw puts lockkit locks around net/http handlers, across every replica that shares a
// Redis:
//
//   - Idempotency turns client retries of POST and PATCH requests that carry an Idempotency-Key
//     header into exactly-once effects, following the IETF draft "The Idempotency-Key HTTP Header
//     Field" and Stripe's behaviour: the first request runs the handler under a lock and stores its
//     response; retries replay it with "Idempotent-Replayed: true"; a duplicate in flight gets 409.
//   - KeyLock serialises requests that share a business key (a path value, a header, a query
//     parameter: ByPathValue, ByHeader, ByQuery, or a KeyFunc of your own). WithKeys locks several
//     keys at once, all or nothing (a transfer locks both accounts); WithLimit(n) lets up to n
//     requests of a key run at once instead (a per-key concurrency limiter over a core semaphore,
//     answering 429 when full); WithReadWrite lets the reads (GET, HEAD, OPTIONS, TRACE) of a key
//     run together and every other request alone (the key's read-write lock).
//
// Both are func(http.Handler) http.Handler, best used per ServeMux route. Every option is an
// Option; the options of one middleware say so, and given to the other they make the constructor
// panic at start-up, as any invalid option does:
//
//	idem := httpmw.Idempotency(locks, httpmw.WithLogger(logger))
//	mux.Handle("POST /orders", idem(createOrder))
//	mux.Handle("PUT /orders/{id}", httpmw.KeyLock(locks, httpmw.ByPathValue("id"))(updateOrder))
//
// A request whose key is held is answered at once (409, or 429 with WithLimit, with Retry-After:
// the holder's remaining TTL), the default of every lockkit adapter; WithWait(d) makes it wait up
// to d instead, never past the request's context. What the client is not told (a failed release, a
// response not stored, Redis down) is logged to WithLogger's logger, slog.Default() by default.
//
// Handlers run with the lock's context: it is cancelled if the lock is lost, and
// core.FromContext(r.Context()) returns the lock, whose Fence a handler can pass to its storage.
//
// # Cost
//
// With Idempotency, a first request costs two round trips to Redis (take the lock and check for a
// stored response in one Lua call; store the response and release in another), a replay one and a
// duplicate in flight one. With KeyLock, an uncontended request costs two (acquire, release), also
// with WithKeys on one Redis server (one script takes every key; on a Cluster, one per hash slot).
//
// # Keys and records
//
// An Idempotency-Key is 1 to 255 printable ASCII characters, sent as a Structured Field String
// ("abc", as the draft says) or bare (abc). It is scoped to the request's method, its route and its
// caller: by default the credentials the request carries (every Authorization and Cookie header
// value and the client certificate), or the principal of WithScope, which adds to method and route
// and never replaces them. A key never replays a response to another scope. The SHA-256 of scope
// and key names the lock ("@http-idem/HEX", in core's namespace "http-idem", see
// core.InNamespace) and the record (lockkit:idem:{@http-idem/HEX} under the core Client's prefix,
// sharing the lock's cluster slot). Both belong to lockkit's exactly-once layer, shared with
// grpcmw and cronlock. The record holds a fingerprint of the request (URI, body,
// WithFingerprintHeaders), the status, the response headers except hop-by-hop fields, Date and
// Set-Cookie, and the body; it expires after WithRetention. Trailers are not stored.
//
// Only definite answers are stored, as Stripe does: an answer that tells the client to try again
// (408, 409, 425, 429, 502, 503, 504) is passed through and the key released, so the retry runs
// the handler; so is any other 5xx and a handler's panic, unless StoreServerErrors.
//
// The handler's response goes to the client as it is written, flushes included (the recorder
// supports http.Flusher and http.ResponseController), and is stored when the handler returns; a
// retry that arrives in between gets 409 (or waits, with WithWait). A streamed response is stored
// like any other if its body fits WithMaxBody; a larger one, or a hijacked connection, is not
// stored and the key is released. The request body is hashed in full for the fingerprint, also the
// part the handler did not read, so the middleware bounds it (WithMaxRequestBody, default 1 MiB):
// a request declaring a longer body gets 413 before the handler runs, and a longer streamed body
// fails the handler's read with an *http.MaxBytesError and is not stored.
//
// KeyLock's lock is its key in core's namespace "http" (WithNamespace): whatever a path value or
// header holds ("cron/billing", "@cron/billing"), it names a KeyLock lock and never a job's, a
// task's or an idempotency key's.
//
// If Redis fails after the handler ran, the response was sent but not stored and the lock stays
// until its TTL (WithTTL) expires: retries get 409 until then and run the handler again after.
//
// # Problems
//
// The middlewares answer with RFC 9457 application/problem+json documents whose type is
// https://github.com/lockkit/lockkit/blob/main/middleware/httpmw/problems.md#SLUG:
//
//	400 idempotency-key-malformed     bad or repeated Idempotency-Key header
//	400 idempotency-key-missing       no key, with RequireKey
//	413 request-body-too-large        body over WithMaxRequestBody
//	409 idempotency-key-in-use        a request with the key is in flight (Retry-After)
//	422 idempotency-key-reused        the key was used with a different request (409 with ConflictOnMismatch)
//	500 idempotency-record-unreadable the stored response is corrupt or of an unknown version
//	500 handler-panicked              replay of a panic, with StoreServerErrors
//	400 lock-key-invalid              KeyFunc failed or gave an unusable key
//	409 resource-locked               KeyLock: the key (a key of WithKeys) is held (Retry-After)
//	429 concurrency-limit             WithLimit: n requests of the key are running (Retry-After)
//	503 lock-unavailable              Redis unreachable, unless FailOpen
//	500 lock-misconfigured            Redis refused the credentials, an ACL grant or a command (never FailOpen)
//
// Retry-After is the holder's remaining lock TTL in seconds (at least 1), the longest a crashed
// holder can keep the key.
package httpmw

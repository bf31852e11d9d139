// Package httpmw puts lockkit locks around net/http handlers: an Idempotency-Key middleware that
// turns client retries of POST and PATCH into exactly-once effects across replicas (following the
// IETF draft "The Idempotency-Key HTTP Header Field" and Stripe's behaviour), and a per-key lock
// middleware that serialises requests sharing a business key.
package httpmw

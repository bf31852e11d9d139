// Package grpcmw provides gRPC server interceptors that take a lockkit lock per business key, so
// that calls for the same account, document or device never run at once across replicas.
//
//	locks, _ := core.New(rdb)
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(locks, grpcmw.WithWait(2*time.Second))),
//		grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(locks, grpcmw.WithKey(grpcmw.ByMetadata("x-account")))),
//	)
//
// # Keys
//
// The key of a call comes from WithKey: by default ByRequest, the request message's own key if it
// implements Keyer (LockKey() string); ByMetadata(name), a request header; or a KeyFunc of your
// own. WithKeys takes several keys per call instead, all or nothing (core.AcquireAll): a transfer
// locks both accounts, and two transfers in opposite directions never deadlock, since a call never
// holds a key while it waits for another. The lock is the key in grpcmw's core namespace: key K
// locks "@grpc/K" (core.InNamespace), so a key sent by a client, whatever bytes it holds, never
// names an HTTP route's, a job's or an idempotency lock. WithNamespace shares a namespace with
// another component on purpose (an httpmw.KeyLock with httpmw.WithNamespace of the same name
// excludes the same keys). WithReadWrite makes the key's lock a read-write lock: the methods it
// counts as read-only run together, the others alone. A call without a key runs without a lock. Streaming calls have no
// request message when the interceptor runs: their key comes from the metadata or a KeyFunc (with
// a nil request).
//
// Every option is an Option. The options of idempotent replay (WithIdempotency,
// WithIdempotencyScope, WithStoredErrors, WithMaxBody) apply to unary calls only:
// StreamServerInterceptor panics at start-up if given one, as it does on any invalid option.
//
// A call whose key is held fails at once (the default of every lockkit adapter); WithWait(d) makes
// it wait up to d, never past its deadline. What the caller is not told goes to WithLogger's
// logger, slog.Default() by default.
//
// WithMethods limits the interceptor to some methods. The interceptors are plain
// grpc.UnaryServerInterceptor and grpc.StreamServerInterceptor values, so go-grpc-middleware's
// selector.UnaryServerInterceptor and selector.StreamServerInterceptor can wrap them for any other
// rule.
//
// # Status codes
//
//   - Another call holds the lock: codes.Aborted (see WithContendedCode) at once, or after waiting
//     up to WithWait. The status carries an errdetails.RetryInfo whose delay is the holder's
//     remaining TTL, and the trailer grpc-retry-pushback-ms says the same to grpc's retry policy.
//   - WithLimit(n): n calls of the key hold its permits: codes.ResourceExhausted, with the same
//     RetryInfo (the earliest permit's remaining TTL) and trailer.
//   - The lock is lost while the handler runs (its TTL ran out or Redis says it belongs to someone
//     else): the handler's context (the stream's Context for streams) is cancelled with a cause
//     matching core.ErrLost, and the call fails with codes.Aborted "lock lost", even if the handler
//     returned success. The core.Client closing under a handler gives codes.Unavailable.
//   - Redis cannot be reached (core.ErrUnavailable): codes.Unavailable.
//   - Redis refuses the lock for a configuration reason (core.ErrMisconfigured: wrong credentials,
//     a missing ACL grant, a disabled command): codes.Internal, which gRPC's retry policies and
//     clients do not retry, and which HTTP gateways answer with 500. (Not FailedPrecondition: that
//     tells the caller its request does not fit the system's state, and gateways answer it with
//     400; the caller can change nothing here.)
//
// Status messages are generic: they never carry the key, the idempotency key, a Redis error or a
// node's address. WithLogger receives the details.
//   - A key that is not a valid lock name (core.ErrInvalid), or a KeyFunc error without a status of
//     its own: codes.InvalidArgument.
//   - The call's deadline passes or it is cancelled while waiting: codes.DeadlineExceeded or
//     codes.Canceled.
//
// # Idempotent replay
//
// WithIdempotency makes unary calls that send the "idempotency-key" metadata run once per key, on
// lockkit's exactly-once layer (the one under httpmw's Idempotency). A key is scoped to the full
// method and the caller: every "authorization" metadata value and the peer's TLS certificate, or
// the principal of WithIdempotencyScope, which adds to the method. The first call takes the lock
// "@grpc-idem/" + hex(SHA-256(scope, key)) and runs the handler; when it returns, its response is
// stored under "lockkit:idem:{@grpc-idem/...}" in the same round trip that releases the lock
// (core.Lock.ReleaseSet), with a SHA-256 fingerprint of the deterministic protobuf encoding of the
// request. A duplicate checks that record in the same round trip as its own acquire attempt
// (core.WithGuard):
//
//   - record present, same request: the stored response is returned, with the response header
//     "idempotent-replayed: true" (the handler does not run);
//   - record present, different request: codes.InvalidArgument, since the client reused a key for a
//     request it does not identify;
//   - first call still running: the duplicate waits for the record as WithWait allows, or fails
//     like any contended call (codes.Aborted with RetryInfo).
//
// Only definite outcomes are stored (Stripe's rule: results of calls that ran and answered for
// good). Errors are not stored, so a failed call can be retried with its key; WithStoredErrors
// stores the given codes too, except the codes that ask for a retry (Canceled, Unknown,
// DeadlineExceeded, ResourceExhausted, Aborted, Internal, Unavailable), which are never stored.
// Responses over WithMaxBody (1 MiB) are returned but not stored. The response is stored as an
// anypb.Any and rebuilt from protoregistry.GlobalTypes, so its type must be registered
// (generated code registers itself). Records live under the core.Client's key prefix
// (core.WithPrefix; "lockkit:" by default).
//
// # Tracing
//
// The interceptors have no tracing of their own: the lock's context derives from the call's context
// through core's Hook, so the spans of package lockotel (lock.wait, lock.hold) nest under the
// server span of the call and the handler's spans under lock.hold.
package grpcmw

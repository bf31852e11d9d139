// Package grpcmw provides gRPC server interceptors that take a lockkit lock per business key, so
// that calls for the same account, document or device never run at once across replicas.
package grpcmw

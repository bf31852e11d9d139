package grpcmw

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// The default scope is the method, every authorization value and the peer's TLS certificate.
func TestScope_credentialsAndPeerCertificate(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ic := newInterceptor(locks, newOptions("UnaryServerInterceptor", []Option{WithIdempotency(time.Minute)}))
	call := func(method, cert string, auth ...string) string {
		ctx := context.Background()
		if len(auth) > 0 {
			md := metadata.MD{}
			for _, a := range auth {
				md.Append("authorization", a)
			}
			ctx = metadata.NewIncomingContext(ctx, md)
		}
		if cert != "" {
			ctx = peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
				PeerCertificates: []*x509.Certificate{{Raw: []byte(cert)}}}}})
		}
		k, err := ic.scope(ctx, method, "k")
		if err != nil {
			t.Fatal(err)
		}
		return k.Lock()
	}
	base := call("/s/M", "alice", "Bearer a")
	if base != call("/s/M", "alice", "Bearer a") {
		t.Fatal("the same call has two scopes")
	}
	seen := map[string]string{base: "base"}
	for what, name := range map[string]string{
		"method":          call("/s/N", "alice", "Bearer a"),
		"certificate":     call("/s/M", "mallory", "Bearer a"),
		"no certificate":  call("/s/M", "", "Bearer a"),
		"authorization":   call("/s/M", "alice", "Bearer b"),
		"two values":      call("/s/M", "alice", "Bearer a", "Bearer b"),
		"no credentials":  call("/s/M", ""),
		"values reversed": call("/s/M", "alice", "Bearer b", "Bearer a"),
	} {
		if prev, dup := seen[name]; dup {
			t.Errorf("%s shares a scope with %s", what, prev)
		}
		seen[name] = what
	}
}

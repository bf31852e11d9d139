package main_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Through Sentinel (--sentinel, --master) and over TLS (rediss://; the certificate is verified
// unless --insecure, and a plain-text connection gets nothing).
func TestCLI_sentinelAndTLS(t *testing.T) {
	bin := build(t)
	ctx := context.Background()
	t.Run("sentinel", func(t *testing.T) {
		s := redistest.StartSentinel(t)
		acquire(t, locktest.NewClient(t, s.Client(t)), ctx, "via-sentinel")
		out, code := newSession(t, bin).run("", "inspect", "--sentinel", s.Addr(), "--master", s.MasterName(), "via-sentinel")
		if code != 0 || !heldYes.MatchString(out) {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("tls", func(t *testing.T) {
		srv := redistest.Start(t, redistest.WithTLS())
		acquire(t, locktest.NewClient(t, srv.Client(t)), ctx, "over-tls")
		se := newSession(t, bin)
		if out, code := se.run("", "inspect", "--url", "rediss://"+srv.Addr(), "--insecure", "over-tls"); code != 0 || !heldYes.MatchString(out) {
			t.Fatalf("rediss:// --insecure: exit %d:\n%s", code, se.script.String())
		}
		if _, stderr, code := se.run3("", "inspect", "--url", "rediss://"+srv.Addr(), "over-tls"); code != 1 || !strings.Contains(stderr, "\nhint: --cacert FILE names the CA") {
			t.Fatalf("unverified certificate: exit %d, want 1 and a hint:\n%s", code, se.script.String())
		}
		if _, stderr, code := se.run3("", "inspect", "--url", "redis://"+srv.Addr(), "--timeout", "1s", "over-tls"); code != 1 || !strings.Contains(stderr, "if it uses TLS, connect with rediss://") {
			t.Fatalf("plain text to a TLS server: exit %d, want 1 and a hint:\n%s", code, se.script.String())
		}
	})
}

var heldYes = regexp.MustCompile(`(?m)^held\s+yes$`)

package adapter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

func TestChecks(t *testing.T) {
	for _, ns := range []string{"", "HTTP", "a/b", "a b", "@x", strings.Repeat("a", 65)} {
		if err := adapter.CheckNamespace("x", ns); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("namespace %q: %v", ns, err)
		}
	}
	for _, ns := range []string{"http", "grpc-idem", "a1", strings.Repeat("a", 64)} {
		if err := adapter.CheckNamespace("x", ns); err != nil {
			t.Errorf("namespace %q: %v", ns, err)
		}
	}
	if err := adapter.CheckTTL("pkg", "WithTTL", core.MinTTL-1); !errors.Is(err, core.ErrInvalid) ||
		!strings.HasPrefix(err.Error(), "lockkit: pkg: WithTTL(") {
		t.Errorf("TTL below the minimum: %v", err)
	}
	if adapter.CheckTTL("pkg", "WithTTL", core.MaxTTL+1) == nil || adapter.CheckTTL("pkg", "WithTTL", core.MaxTTL) != nil {
		t.Error("TTL bounds are not core's")
	}
	if adapter.CheckWait("pkg", -time.Second) == nil || adapter.CheckWait("pkg", 0) != nil {
		t.Error("wait check")
	}
}

func TestLost(t *testing.T) {
	for _, tc := range []struct {
		cause error
		lost  bool
	}{
		{nil, false},
		{core.ErrReleased, false},
		{context.Canceled, false},
		{&core.LostError{Name: "x", Reason: "expired"}, true},
		{core.ErrClosed, true},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		if tc.cause != nil {
			cancel(tc.cause)
		}
		if got := adapter.Lost(ctx); (got != nil) != tc.lost {
			t.Errorf("cause %v: Lost = %v", tc.cause, got)
		}
		cancel(nil)
	}
}

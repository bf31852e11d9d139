package fenced_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockkit/lockkit/examples/fencing/fenced"
	"github.com/lockkit/lockkit/internal/pgtest"
	"github.com/lockkit/lockkit/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRedis_acceptsSameOrHigher_rejectsLower(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	r := fenced.NewRedis(rdb, "acct:{1}")
	steps := []struct {
		fence int64
		want  error
	}{{10, nil}, {10, nil}, {9, fenced.ErrStale}, {11, nil}, {10, fenced.ErrStale}, {1 << 53, nil}, {1<<53 - 1, fenced.ErrStale}}
	for i, s := range steps {
		if err := r.Write(ctx, s.fence, "v"); !errors.Is(err, s.want) {
			t.Fatalf("step %d: write with fence %d: %v, want %v", i, s.fence, err, s.want)
		}
	}
	if f, v, err := r.Read(ctx); err != nil || f != 1<<53 || v != "v" {
		t.Fatalf("read %d %q %v", f, v, err)
	}
}

func TestPostgres_acceptsHigherOnly(t *testing.T) {
	db := pgtest.Start(t).Connect(t)
	ctx := context.Background()
	p := fenced.NewPostgres(db, 1)
	if err := p.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Init(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	const big = int64(1_800_000_000_000_000) // a clock-based fence (µs)
	steps := []struct {
		fence int64
		want  error
	}{{big, nil}, {big, fenced.ErrStale}, {big - 1, fenced.ErrStale}, {big + 1, nil}}
	for i, s := range steps {
		if err := p.Write(ctx, s.fence, "v"); !errors.Is(err, s.want) {
			t.Fatalf("step %d: write with fence %d: %v, want %v", i, s.fence, err, s.want)
		}
	}
	var fence int64
	if err := db.QueryRow(ctx, "SELECT fence FROM fenced_records WHERE id = 1").Scan(&fence); err != nil || fence != big+1 {
		t.Fatalf("row fence %d, %v", fence, err)
	}
	if err := fenced.NewPostgres(db, 2).Write(ctx, big+5, "x"); !errors.Is(err, fenced.ErrStale) {
		t.Fatalf("write to a missing row: %v, want ErrStale (no row updated)", err)
	}
}

package pgtest_test

import (
	"context"
	"testing"

	"github.com/lockkit/lockkit/internal/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStart_queriesAndIsPrivate(t *testing.T) {
	a := pgtest.Start(t)
	b := pgtest.Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers on %s", a.Addr())
	}
	ctx := context.Background()
	ca, cb := a.Connect(t), b.Connect(t)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_a (id int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("table visible on the other server: %d, %v", n, err)
	}
	var v string
	if err := ca.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s on %s", v, a.Addr())
}

package lockotel_test

import (
	"context"
	"log"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/otel/lockotel"
)

// Install the hook on a client: every lock of the client is traced and measured with the global
// providers.
func ExampleHook() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb, core.WithHook(lockotel.Hook()))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	ctx, span := otel.Tracer("app").Start(context.Background(), "rebuild-index")
	defer span.End()
	// lock.wait and lock.hold become children of rebuild-index; the work nests under lock.hold.
	err = locks.Do(ctx, "index", 30*time.Second, func(ctx context.Context) error {
		return rebuildIndex(ctx)
	})
	if err != nil {
		log.Print(err)
	}
}

func rebuildIndex(context.Context) error { return nil }

// Lock names like "invoice:8812" would make a time series per invoice: record only their kind.
func ExampleWithNameOnMetrics() {
	kind := func(name string) string {
		k, _, _ := strings.Cut(name, ":")
		return k
	}
	hook := lockotel.Hook(lockotel.WithNameOnMetrics(kind), lockotel.WithRenewalEvents())
	_ = core.WithHook(hook)
}

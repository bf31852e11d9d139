package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/examples/fencing/fenced"
	"github.com/redis/go-redis/v9"
)

// Write through a fenced Redis record under the lock: a holder that lost the lock while paused
// gets fenced.ErrStale instead of overwriting its successor's work.
func ExampleRedis_Write() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	client, _ := core.New(rdb)
	account := fenced.NewRedis(rdb, "balance:{account-42}")
	err := client.Do(ctx, "account-42", 10*time.Second, func(ctx context.Context) error {
		l, _ := core.FromContext(ctx)
		return account.Write(ctx, l.Fence(), "100.00")
	})
	if errors.Is(err, fenced.ErrStale) {
		fmt.Println("a newer holder has written: this one lost the lock")
	}
}

// Write a PostgreSQL row only if no newer holder has: UPDATE … WHERE fence < $1.
func ExamplePostgres_Write() {
	ctx := context.Background()
	db, _ := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test")
	client, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	row := fenced.NewPostgres(db, 42)
	_ = row.Init(ctx)
	err := client.Do(ctx, "account-42", 10*time.Second, func(ctx context.Context) error {
		l, _ := core.FromContext(ctx)
		return row.Write(ctx, l.Fence(), "100.00")
	})
	if errors.Is(err, fenced.ErrStale) {
		fmt.Println("a newer holder has written: this one lost the lock")
	}
}

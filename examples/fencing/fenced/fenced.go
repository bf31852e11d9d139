package fenced

import (
	"context"
	_ "embed"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// ErrStale means a write was rejected because the resource has seen a higher fencing token: a
// newer lock holder has written since, so the writer's lock must have been lost.
var ErrStale = errors.New("fenced: write rejected: a newer fencing token was seen")

//go:embed write.lua
var writeLua string

// Redis is a record in Redis that accepts a write only if its fencing token is at least the
// highest one it has seen (a lock holder may write several times with its fence). The check and the
// write are one Lua script, so no write can slip in between.
type Redis struct {
	rdb    redis.Cmdable
	key    string
	script *redis.Script
}

// NewRedis returns the fenced record stored under key (a hash with fields fence and value). The
// script's hash comes from Redis (SCRIPT LOAD), not from crypto/sha1, so that the program runs in
// FIPS 140-only mode (GODEBUG=fips140=only) too.
func NewRedis(rdb redis.Cmdable, key string) *Redis {
	return &Redis{rdb: rdb, key: key, script: redis.NewScriptServerSHA(writeLua)}
}

// Write stores value if fence is at least the highest fence seen, and returns ErrStale otherwise.
func (r *Redis) Write(ctx context.Context, fence int64, value string) error {
	ok, err := r.script.Run(ctx, r.rdb, []string{r.key}, fence, value).Int64()
	if err != nil {
		return err
	}
	if ok != 1 {
		return ErrStale
	}
	return nil
}

// Read returns the stored value and the fence that wrote it (0 and "" if never written).
func (r *Redis) Read(ctx context.Context) (fence int64, value string, err error) {
	m, err := r.rdb.HGetAll(ctx, r.key).Result()
	if err != nil {
		return 0, "", err
	}
	fence, _ = strconv.ParseInt(m["fence"], 10, 64)
	return fence, m["value"], nil
}

// Execer runs a SQL statement: *pgx.Conn, *pgxpool.Pool and pgx.Tx all satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Schema creates the table Postgres writes to. Every row carries the fence of its last write.
const Schema = `CREATE TABLE IF NOT EXISTS fenced_records (
	id    bigint PRIMARY KEY,
	value text   NOT NULL DEFAULT '',
	fence bigint NOT NULL DEFAULT 0
)`

// Postgres is a row of the fenced_records table that accepts a write only if its fencing token is
// higher than the fence of the last write: the row's own UPDATE checks it, so a stale holder's
// write changes nothing whatever it read before.
//
// The check is strict (fence < $1): each fence writes the row once, which suits one statement per
// critical section. Use fence <= $1 to let a holder write the row several times.
type Postgres struct {
	db Execer
	id int64
}

// NewPostgres returns the fenced row with the given id. Call Init once to create it.
func NewPostgres(db Execer, id int64) *Postgres { return &Postgres{db: db, id: id} }

// Init creates the table (Schema) and the row, if missing.
func (p *Postgres) Init(ctx context.Context) error {
	if _, err := p.db.Exec(ctx, Schema); err != nil {
		return err
	}
	_, err := p.db.Exec(ctx, `INSERT INTO fenced_records (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, p.id)
	return err
}

// Write stores value if fence is higher than the fence of the row's last write, and returns
// ErrStale otherwise.
func (p *Postgres) Write(ctx context.Context, fence int64, value string) error {
	tag, err := p.db.Exec(ctx,
		`UPDATE fenced_records SET value = $3, fence = $1 WHERE id = $2 AND fence < $1`, fence, p.id, value)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return ErrStale
	}
	return nil
}

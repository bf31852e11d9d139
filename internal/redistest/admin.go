package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// adminTimeout bounds one admin command.
const adminTimeout = 10 * time.Second

// adminClient returns a single-connection client with full privileges and no
// retries, for admin commands. The caller closes it.
func (s *Server) adminClient() *redis.Client {
	o := s.AdminOptions()
	o.MaxRetries = -1
	o.PoolSize = 1
	o.DialTimeout = 2 * time.Second
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o)
}

// withAdmin runs fn with a new admin client and a context bounded by timeout.
func (s *Server) withAdmin(timeout time.Duration, fn func(context.Context, *redis.Client) error) error {
	c := s.adminClient()
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return fn(ctx, c)
}

// do runs one command on a new admin connection. A nil reply is returned as
// nil, without error.
func (s *Server) do(timeout time.Duration, args ...any) (any, error) {
	var res any
	err := s.withAdmin(timeout, func(ctx context.Context, c *redis.Client) error {
		v, err := c.Do(ctx, args...).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		res = v
		return err
	})
	return res, err
}

// Do runs one command on a short-lived admin connection (see AdminOptions)
// and returns its reply as go-redis' Cmd.Result does, with a nil reply
// returned as nil. It calls t.Fatal on any error.
func (s *Server) Do(t testing.TB, args ...any) any {
	t.Helper()
	res, err := s.do(adminTimeout, args...)
	if err != nil {
		t.Fatalf("redistest: %s: %v: %v", s.Addr(), args, err)
	}
	return res
}

// Flush deletes all data of the server (FLUSHALL).
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	s.Do(t, "FLUSHALL")
}

// ResetStats resets the server's statistics, command statistics included
// (CONFIG RESETSTAT).
func (s *Server) ResetStats(t testing.TB) {
	t.Helper()
	s.Do(t, "CONFIG", "RESETSTAT")
}

// CommandStats returns the server's INFO commandstats as a map from lower
// case command name (e.g. "set", "evalsha", "publish"; subcommands like
// "config|resetstat") to the number of calls. Commands that redistest itself
// sends on admin connections (such as "hello" and "info") are counted too.
func (s *Server) CommandStats(t testing.TB) map[string]int64 {
	t.Helper()
	var info string
	err := s.withAdmin(adminTimeout, func(ctx context.Context, c *redis.Client) (err error) {
		info, err = c.Info(ctx, "commandstats").Result()
		return err
	})
	if err != nil {
		t.Fatalf("redistest: %s: INFO commandstats: %v", s.Addr(), err)
	}
	stats, err := parseCommandStats(info)
	if err != nil {
		t.Fatalf("redistest: %s: %v", s.Addr(), err)
	}
	return stats
}

// parseCommandStats parses lines like
// "cmdstat_set:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0".
func parseCommandStats(info string) (map[string]int64, error) {
	stats := make(map[string]int64)
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, fields, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("parse commandstats line %q: %w", line, err)
				}
				stats[strings.ToLower(name)] = n
			}
		}
	}
	return stats, nil
}

// parseInfo parses "key:value" lines of INFO or CLUSTER INFO output.
func parseInfo(info string) map[string]string {
	m := make(map[string]string)
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

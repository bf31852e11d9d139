package chaos_test

import (
	"os"
	"strconv"

	"github.com/lockkit/lockkit/core"
)

// withPipelining is the checker's pipelining dimension: LOCKKIT_SAFETY_PIPELINE=n gives every
// slot's Client core.WithPipelining(n) (1: every command through go-redis's pipeliner, where a
// lost reply or a batch replay hits every batchmate). Unset or 0: core's default (pipelining on
// from 8 commands in flight, issue #38).
func withPipelining(opts []core.Option) []core.Option {
	if n, _ := strconv.Atoi(os.Getenv("LOCKKIT_SAFETY_PIPELINE")); n > 0 {
		return append(opts, core.WithPipelining(n))
	}
	return opts
}

package httpmw

import (
	"net/http"

	"github.com/lockkit/lockkit/core"
)

// Limit returns KeyLock with WithLimit(n): at most n requests sharing a key run at once.
//
// Deprecated: use KeyLock(locks, key, WithLimit(n), opts...).
func Limit(locks *core.Client, key KeyFunc, n int, opts ...Option) func(http.Handler) http.Handler {
	return KeyLock(locks, key, append(opts[:len(opts):len(opts)], WithLimit(n))...)
}

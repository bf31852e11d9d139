// Released with the root module: at a release commit, tag vX.Y.Z, internal/embedredis/vX.Y.Z and
// lockkittest/vX.Y.Z, and require those versions below (the replace directives serve development
// in this repository only). The root's v0.1.0 predates internal/embedredis as a module of its own.
module github.com/lockkit/lockkit/lockkittest

go 1.26.0

replace (
	github.com/lockkit/lockkit => ../
	github.com/lockkit/lockkit/internal/embedredis => ../internal/embedredis
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/lockkit/lockkit v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/internal/embedredis v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

package grpcmw

import (
	"strings"

	"google.golang.org/grpc/codes"
)

// validateArgs refuses the arguments that would be read as something else: a nil function for
// the default, no method (or a name no call has) for every method, a code gRPC does not define.
func (o *options) validateArgs() error {
	switch {
	case o.Has("WithIdempotencyScope") && o.scope == nil:
		return invalidOption("WithIdempotencyScope(nil)")
	case o.Has("WithKeyFunc") && o.keyFunc == nil:
		return invalidOption("WithKeyFunc(nil)")
	case o.Has("WithMetadataKey") && o.mdKey == "":
		return invalidOption(`WithMetadataKey("")`)
	case o.Has("WithMethods") && len(o.methods) == 0:
		return invalidOption("WithMethods needs at least one method")
	case o.code > maxCode:
		return invalidOption("WithContendedCode(%d) is not a gRPC status code", uint32(o.code))
	}
	for _, m := range o.methods {
		if !strings.HasPrefix(m, "/") || len(m) < 2 {
			return invalidOption("WithMethods(%q): a full method (\"/pkg.Service/Method\") or a service prefix (\"/pkg.Service/\")", m)
		}
	}
	for _, c := range o.stored {
		if c > maxCode {
			return invalidOption("WithStoredErrors(%d) is not a gRPC status code", uint32(c))
		}
	}
	return nil
}

// maxCode is the largest status code gRPC defines.
const maxCode = codes.Unauthenticated

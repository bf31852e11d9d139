package httpmw_test

import (
	"errors"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// An argument that would be read as something else — a nil scope as the default scope, an empty
// record prefix as the default prefix, an empty method or header name that matches nothing — is
// refused at construction, naming the option.
func TestOptions_outOfRangeArgumentsAreRefused(t *testing.T) {
	_, locks := setup(t)
	for _, tc := range []struct {
		want string
		opt  httpmw.Option
	}{
		{"lockkit: httpmw: WithScope(nil)", httpmw.WithScope(nil)},
		{`lockkit: httpmw: WithRecordPrefix("") is empty: leave the option out for the default`, httpmw.WithRecordPrefix("")},
		{"lockkit: httpmw: WithMethods: a method is empty", httpmw.WithMethods("POST", "")},
		{"lockkit: httpmw: WithMethods needs at least one method", httpmw.WithMethods()},
		{"lockkit: httpmw: WithFingerprintHeaders: a header name is empty", httpmw.WithFingerprintHeaders("X-A", "")},
	} {
		err, _ := panicOf(func() { httpmw.Idempotency(locks, tc.opt) }).(error)
		if !errors.Is(err, core.ErrInvalid) || err.Error() != tc.want {
			t.Errorf("panicked with %v, want %q matching core.ErrInvalid", err, tc.want)
		}
	}
}

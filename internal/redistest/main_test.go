package redistest_test

import (
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

func TestMain(m *testing.M) {
	locktest.VerifyTestMain(m)
}

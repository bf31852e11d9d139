package locktest

import (
	"testing"

	"github.com/lockkit/lockkit/internal/leaktest"
)

// VerifyTestMain runs the tests of m and fails the run if goroutines they started outlive them
// (see leaktest.VerifyTestMain, which packages that core imports use directly).
func VerifyTestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

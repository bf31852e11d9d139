package compat_test

import (
	"testing"

	"github.com/lockkit/lockkit/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

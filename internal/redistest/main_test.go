package redistest_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	start := time.Now()
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	fmt.Fprintf(os.Stderr, "%s\n", buf[:n])
	err := goleak.Find()
	fmt.Fprintf(os.Stderr, "goleak took %v: %v\n", time.Since(start), err)
	os.Exit(code)
}

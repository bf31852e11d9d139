//go:build unix

package core_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used so far: the client's
// share of a benchmark, without the redis-servers'.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

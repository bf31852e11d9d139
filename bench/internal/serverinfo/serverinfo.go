// Package serverinfo reads figures from a Redis server's INFO reply for the benchmark tools.
package serverinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// CPUSeconds returns used_cpu_user + used_cpu_sys from INFO text (the cpu section or more): the
// server's CPU time since it started, in seconds. It fails when a counter is missing or malformed.
func CPUSeconds(info string) (float64, error) {
	var total float64
	seen := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO %s: %w", k, err)
		}
		total += f
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("INFO: used_cpu_user and used_cpu_sys: found %d of 2", seen)
	}
	return total, nil
}

package redistest

import (
	"fmt"
	"net"
	"syscall"
)

// clusterBusOffset is the distance between a cluster node's port and its
// cluster bus port (Redis' default, which works on every Redis version).
const clusterBusOffset = 10000

// pickPorts returns n distinct free TCP ports on 127.0.0.1. With bus, port
// p+clusterBusOffset is free as well for each returned port p. The ports are
// free when checked; redis-server may still lose a race for one of them, which
// the callers handle by retrying with new ports.
func pickPorts(n int, bus bool) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	listen := func(port int) (int, error) {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return 0, err
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 100*n {
			return nil, fmt.Errorf("redistest: could not find %d free ports on 127.0.0.1", n)
		}
		p, err := listen(0)
		if err != nil {
			return nil, fmt.Errorf("redistest: listen on 127.0.0.1: %w", err)
		}
		if bus {
			if p+clusterBusOffset > 65535 {
				continue
			}
			if _, err := listen(p + clusterBusOffset); err != nil {
				continue
			}
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// sysProcAttr returns the process attributes of every child process: it is
// killed when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

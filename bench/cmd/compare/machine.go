package main

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// machine describes where and how a run was made.
type machine struct {
	start, end         time.Time
	command            string
	nproc, maxprocs    int
	cpu, kernel        string
	goVersion, redis   string
	loadStart, loadEnd string
	lockkit, redsync   string
	redislock, goredis string
	redisBin, goarchOS string
}

func collectMachine(bin string, args []string) *machine {
	m := &machine{start: time.Now(), nproc: runtime.NumCPU(), maxprocs: runtime.GOMAXPROCS(0),
		goVersion: runtime.Version(), goarchOS: runtime.GOOS + "/" + runtime.GOARCH, redisBin: bin}
	m.command = "cd bench && go run ./cmd/compare"
	for _, a := range args {
		m.command += " " + shellQuote(a)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		m.redis = strings.TrimSpace(string(out))
	}
	m.loadStart = loadavg()
	m.lockkit, m.redsync, m.redislock, m.goredis = "(devel)", "?", "?", "?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = "(this checkout" + gitRev() + ")"
			}
			switch d.Path {
			case "github.com/lockkit/lockkit":
				m.lockkit = v
			case "github.com/go-redsync/redsync/v4":
				m.redsync = v
			case "github.com/bsm/redislock":
				m.redislock = v
			case "github.com/redis/go-redis/v9":
				m.goredis = v
			}
		}
	}
	return m
}

func (m *machine) finish() {
	m.end = time.Now()
	m.loadEnd = loadavg()
}

// loadavg is the 1/5/15-minute load average: the machine may be shared.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?;&|<>()") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// gitRev describes the checkout lockkit is built from, when git can tell.
func gitRev() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := ", commit " + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "core").Output(); err == nil && len(st) > 0 {
		rev += " with uncommitted changes in core/"
	}
	return rev
}

package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runChild runs the role of a child process (the test binary re-executed with childEnv set).
func runChild(role string) int {
	var err error
	switch role {
	case "pause":
		err = pauseChild(os.Getenv("LOCKKIT_CHAOS_REDIS"), os.Getenv("LOCKKIT_CHAOS_PG"), os.Stdin, os.Stdout)
	case "starved":
		err = starvedChild(os.Getenv("LOCKKIT_CHAOS_REDIS"), starvedHolds("LOCKKIT_CHAOS_HOLDS"), starvedHolds("LOCKKIT_CHAOS_REFUSED"), os.Stdout)
	case "lin":
		err = linChild(os.Getenv("LOCKKIT_CHAOS_REDIS"), os.Getenv("LOCKKIT_CHAOS_LIN"), os.Stdout)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// child is a running child process whose stdout is read line by line.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedWriter
	once   sync.Once
}

// startChild re-executes the test binary in role with the extra environment; the child is killed
// when the test ends, and its stderr logged if the test failed.
func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &child{cmd: cmd, lines: make(chan string, 4096), stderr: &lockedWriter{}}
	cmd.Stderr = c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		c.kill()
		<-read
		if t.Failed() {
			t.Logf("child %s stderr:\n%s", role, c.stderr.String())
		}
	})
	return c
}

func (c *child) kill() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
}

// wait waits for the child to exit by itself, at most d.
func (c *child) wait(t *testing.T, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		c.once.Do(func() {})
		if err != nil {
			t.Errorf("child: %v", err)
		}
	case <-time.After(d):
		c.kill()
		<-done
		t.Errorf("child did not exit within %v", d)
	}
}

// collect gathers every line the child prints from now on; the returned func gives them once the
// child has exited.
func (c *child) collect() func() []string {
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range c.lines {
			lines = append(lines, l)
		}
	}()
	return func() []string {
		<-done
		return lines
	}
}

// line returns the next line the child printed, failing the test after d.
func (c *child) line(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("child exited early")
		}
		return l
	case <-time.After(d):
		t.Fatalf("child said nothing for %v", d)
	}
	return ""
}

// lockedWriter collects a child's stderr.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// background is a context for children, which have no test to bound them: they give up after a
// minute so that an orphan cannot live on.
func background() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

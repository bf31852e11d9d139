// Package leaktest checks that tests leave no goroutine running, without a third-party module
// (a dependency every module requiring lockkit's would inherit). It imports nothing of lockkit,
// so that packages core imports can use it too; package locktest forwards to it.
package leaktest

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// LeakTimeout is how long VerifyTestMain waits for goroutines started by the tests to end.
const LeakTimeout = 5 * time.Second

// VerifyTestMain runs the tests of m and, when they pass, fails the run if goroutines the tests
// started are still running LeakTimeout later (a client not closed, a watchdog or subscription
// that outlives its lock, a server not stopped); it prints their stacks. Call it from TestMain.
//
// It makes the check go.uber.org/goleak makes, without a dependency that every module requiring
// lockkit's would inherit: tests of published modules use this instead.
func VerifyTestMain(m *testing.M) {
	before := goroutines()
	code := m.Run()
	if code == 0 {
		if stacks := leaked(before, LeakTimeout); stacks != "" {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines still running %v after the tests passed:\n\n%s\n", LeakTimeout, stacks)
			code = 1
		}
	}
	os.Exit(code)
}

// leaked polls until every goroutine not in before (other than the caller and the runtime's
// process-lifetime helpers) has ended, or d passes; it returns the stacks of those still running
// then, or "" if none.
func leaked(before map[int]bool, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		var extra [][]byte
		for id, stack := range goroutineStacks() {
			if !before[id] && !daemon(stack) {
				extra = append(extra, stack)
			}
		}
		if len(extra) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return string(bytes.Join(extra, []byte("\n\n")))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goroutines returns the ids of the goroutines running now.
func goroutines() map[int]bool {
	ids := map[int]bool{}
	for id := range goroutineStacks() {
		ids[id] = true
	}
	return ids
}

// goroutineStacks returns the stack of every goroutine but the caller's, by goroutine id.
func goroutineStacks() map[int][]byte {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := map[int][]byte{}
	for i, g := range bytes.Split(buf, []byte("\n\n")) {
		if i == 0 { // runtime.Stack lists the calling goroutine first
			continue
		}
		// "goroutine 42 [chan receive]:"
		head, _, _ := bytes.Cut(g, []byte(" ["))
		id, err := strconv.Atoi(string(bytes.TrimPrefix(head, []byte("goroutine "))))
		if err != nil {
			continue
		}
		stacks[id] = g
	}
	return stacks
}

// daemon reports whether a goroutine is one the runtime keeps for the life of the process once a
// package starts it (signal delivery after signal.Notify).
func daemon(stack []byte) bool {
	for _, fn := range []string{"os/signal.signal_recv", "os/signal.loop", "runtime.ensureSigM"} {
		if bytes.Contains(stack, []byte("\n"+fn+"(")) {
			return true
		}
	}
	return false
}

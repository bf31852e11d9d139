package compat_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/compat"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The environment scripts/compat.sh sets: the two workers' binaries and what they were built from.
const (
	baseEnv    = "LOCKKIT_COMPAT_BASE"     // the baseline worker
	headEnv    = "LOCKKIT_COMPAT_HEAD"     // the HEAD worker
	baseRevEnv = "LOCKKIT_COMPAT_BASE_REV" // the baseline's commit or tag, for the report
	durEnv     = "LOCKKIT_COMPAT_DURATION" // the longest the workers run (default 90s)
)

// minRun is how long the workers run at least; after it they stop as soon as every pair of kinds
// (baseline × HEAD) has met, or at the longest duration.
const minRun = 10 * time.Second

// TestCompat runs a baseline worker and a HEAD worker side by side on one redis-server, both
// taking every kind of hold on the same two names, and checks what they recorded: no two
// conflicting holds live at once, permits within their lowest limit, every error naming a key
// schema, no hold lost, and every pair of kinds (baseline × HEAD) met. `make compat` builds the
// workers and runs it; without them it is skipped.
func TestCompat(t *testing.T) {
	base, head := os.Getenv(baseEnv), os.Getenv(headEnv)
	if base == "" || head == "" {
		t.Skipf("%s and %s are not set: `make compat` builds the workers and runs this test", baseEnv, headEnv)
	}
	most := 90 * time.Second
	if s := os.Getenv(durEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", durEnv, err)
		}
		most = d
	}
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), most+time.Minute)
	defer cancel()
	var (
		mu     sync.Mutex
		events []compat.Event
		wg     sync.WaitGroup
		stdins []io.WriteCloser
	)
	start := time.Now()
	for i, w := range []struct{ name, bin string }{{"base", base}, {"head", head}} {
		cmd := exec.CommandContext(ctx, w.bin, "-addr", srv.Addr(), "-name", w.name, "-duration", most.String(),
			"-eof", "-names", "2", "-seed", fmt.Sprint(time.Now().UnixNano()+int64(i)))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, in)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s worker: %v", w.name, err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var e compat.Event
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Errorf("%s worker printed %q: %v", w.name, sc.Text(), err)
					continue
				}
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s worker: %v\n%s", w.name, err, stderr.String())
			}
		})
	}
	// Until every pair has met (after minRun), or the workers end on their own. After minRun each
	// worker is steered to the kinds of the pairs not met yet, so that a rare pair (two lock sets,
	// each needing both names free) does not depend on luck.
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for met := false; !met; {
		select {
		case <-done:
			met = true
		case <-tick.C:
			mu.Lock()
			r := compat.Check("base", "head", events)
			mu.Unlock()
			if time.Since(start) < minRun {
				continue
			}
			baseKinds, headKinds := r.UnmetKinds()
			met = len(baseKinds) == 0
			for i, ks := range [][]string{baseKinds, headKinds} {
				if !met {
					_, _ = fmt.Fprintf(stdins[i], "kinds %s\n", strings.Join(ks, ","))
				}
			}
		}
	}
	for _, in := range stdins {
		_ = in.Close()
	}
	<-done
	r := compat.Check("base", "head", events)
	t.Logf("baseline %s × HEAD on one redis-server for %v: %d attempts, holds %v\n%s",
		os.Getenv(baseRevEnv), time.Since(start).Round(time.Second), len(events), r.Holds, r.Table())
	if len(r.Problems) > 0 {
		t.Errorf("%d problems:\n%s", len(r.Problems), summary(r.Problems))
	}
	if u := r.Unmet(); len(u) > 0 {
		t.Errorf("pairs of kinds never met in %v (no evidence either way): %s", most, strings.Join(u, ", "))
	}
}

// summary shows the first few problems of each class (a violation, an error naming no key schema,
// a hold lost) and how many more there are.
func summary(problems []string) string {
	const shown = 5
	var b strings.Builder
	for _, class := range []string{"VIOLATION", "error naming no key schema", "lost"} {
		n := 0
		for _, p := range problems {
			if strings.HasPrefix(p, class) {
				if n++; n <= shown {
					b.WriteString(p + "\n")
				}
			}
		}
		if n > shown {
			fmt.Fprintf(&b, "... and %d more of %q\n", n-shown, class)
		}
	}
	return b.String()
}

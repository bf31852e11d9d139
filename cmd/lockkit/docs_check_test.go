package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docAddrs are the server addresses the docs use; each stands for the test's server (a cluster's
// seed node for --cluster). A command naming another address fails the test.
var docAddrs = []string{"localhost:6379", "127.0.0.1:6379", "10.0.0.5:6379"}

// valueFlags are lockkit's flags that take a value (to tell flags' values from arguments).
var valueFlags = []string{"url", "sentinel", "master", "prefix", "cacert", "timeout", "for", "interval", "retention",
	"output", "o", "method", "route", "header", "cert", "principal"}

// docArgs is a doc command line made runnable: its arguments (placeholders filled in, addresses
// mapped to the test's server) and environment.
type docArgs struct {
	args, env []string
	pos       []string // the arguments that are not flags, the command first
	asJSON    bool
	help      bool // -h or --help
}

func prepare(t *testing.T, target docTarget, fx *docFixture, c docCommand) docArgs {
	t.Helper()
	fill := placeholders(fx)
	remap := func(s string) string {
		for _, a := range docAddrs {
			s = strings.ReplaceAll(s, a, target.addr)
		}
		return s
	}
	var d docArgs
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "REDIS_URL=") {
			d.env = append(d.env, e)
		}
	}
	d.env = append(d.env, "REDIS_URL=redis://"+target.addr)
	for _, e := range c.env {
		d.env = append(d.env, remap(e))
		if v, ok := strings.CutPrefix(e, "REDIS_URL="); ok {
			checkAddr(t, c, v)
		}
	}
	words := c.words[1:]
	for i := 0; i < len(words); i++ {
		w := words[i]
		if v, ok := fill[w]; ok {
			w = v
		}
		d.args = append(d.args, remap(w))
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		switch {
		case !strings.HasPrefix(w, "-"):
			d.pos = append(d.pos, w)
		case name == "json":
			d.asJSON = true
		case (name == "o" || name == "output") && (value == "json" || !hasValue && i+1 < len(words) && words[i+1] == "json"):
			d.asJSON = true
			if !hasValue {
				i++
				d.args = append(d.args, words[i])
			}
		case name == "h" || name == "help":
			d.help = true
		case slices.Contains(valueFlags, name):
			if !hasValue && i+1 < len(words) {
				i++
				value = words[i]
				d.args = append(d.args, remap(value))
			}
			if name == "url" {
				checkAddr(t, c, value)
			}
		}
	}
	return d
}

// checkAddr fails the test when a doc command names a server that is not one of docAddrs (it would
// run against some other server). Whether the rest of the URL is right is the command's to say.
func checkAddr(t *testing.T, c docCommand, url string) {
	t.Helper()
	for _, a := range docAddrs {
		if strings.Contains(url, a) {
			return
		}
	}
	t.Fatalf("%s: %q names a server the test does not know (%q): use one of %q", c.where, c.text, url, docAddrs)
}

// runDocCommand runs one doc command line and checks its exit code and output.
func runDocCommand(t *testing.T, bin string, target docTarget, fx *docFixture, c docCommand) {
	d := prepare(t, target, fx, c)
	if len(d.pos) == 2 && d.pos[0] == "watch" && !d.help {
		runDocWatch(t, bin, fx, c, d)
		return
	}
	answer := "y"
	for _, l := range c.sample {
		if _, a, ok := strings.Cut(l, "[y/N] "); ok {
			answer = a
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, d.args...)
	cmd.Env, cmd.Stdin = d.env, strings.NewReader(answer+"\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: lockkit %s: %v\nstdout:\n%s\nstderr:\n%s", c.where, strings.Join(d.args, " "), err, &stdout, &stderr)
	}
	// What a terminal shows: a question on stderr, the answer typed, then stdout.
	screen := stdout.String()
	if q := stderr.String(); strings.HasSuffix(q, "[y/N] ") {
		screen = q + answer + "\n" + screen
	} else if q != "" {
		t.Errorf("%s: lockkit %s wrote on stderr:\n%s", c.where, strings.Join(d.args, " "), q)
	}
	checkOutput(t, fx, c, d, stdout.String())
	if c.sample != nil {
		compareSample(t, c, d, screen)
	}
}

// checkOutput checks that a command printed what it promises for the fixture.
func checkOutput(t *testing.T, fx *docFixture, c docCommand, d docArgs, out string) {
	t.Helper()
	fail := func(what string) {
		t.Errorf("%s: lockkit %s: %s; output:\n%s", c.where, strings.Join(d.args, " "), what, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var objs []map[string]any
	if d.asJSON {
		for _, l := range lines {
			var o map[string]any
			if err := json.Unmarshal([]byte(l), &o); err != nil && l != "" {
				fail("not JSON Lines: " + err.Error())
			} else if l != "" {
				objs = append(objs, o)
			}
		}
	}
	switch cmd := d.pos[0]; {
	case cmd == "help" || d.help:
		if !strings.HasPrefix(out, "lockkit — ") && !strings.HasPrefix(out, "Usage: lockkit ") {
			fail("not a help text")
		}
	case cmd == "ls":
		pattern := "*"
		if len(d.pos) > 1 {
			pattern = d.pos[1]
		}
		var want, got []string
		for _, n := range fx.names {
			if globMatch(pattern, n) {
				want = append(want, n)
			}
		}
		for _, o := range objs {
			got = append(got, o["name"].(string))
		}
		if !d.asJSON {
			if mask(lines[0]) != "NAME  MODE  HOLDER  HELD FOR  TTL  FENCE  QUEUED  WAITING" {
				fail("no ls header")
			}
			for _, row := range lines[1:] {
				if cols := columns.Split(row, -1); len(cols) != 8 {
					fail("a row without 8 columns: " + row)
				} else if !slices.Contains(got, cols[0]) {
					got = append(got, cols[0])
				}
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if len(want) == 0 || !slices.Equal(got, want) {
			fail("listed " + strings.Join(got, ", ") + "; want " + strings.Join(want, ", "))
		}
	case cmd == "inspect" && d.asJSON:
		if len(objs) != 1 || objs[0]["held"] != true {
			fail("want one object, held")
		}
	case cmd == "inspect":
		if !heldYes.MatchString(out) {
			fail("not held")
		}
	case cmd == "release" && d.asJSON:
		if len(objs) != 1 || objs[0]["released"] != true {
			fail("want one object, released")
		}
	case cmd == "release":
		if !strings.HasPrefix(out, "released "+d.pos[1]+" ") {
			fail("not released")
		}
	case cmd == "idem" && d.asJSON:
		if len(objs) != 1 || objs[0]["status"] != "stored" {
			fail("want one object, stored")
		}
	case cmd == "idem":
		if !regexp.MustCompile(`(?m)^status\s+stored$`).MatchString(out) {
			fail("no stored record")
		}
	case cmd == "doctor" && d.asJSON:
		if len(objs) < 9 || objs[0]["verdict"] == nil {
			fail("want one object per check, with its verdict")
		}
	case cmd == "doctor":
		if !regexp.MustCompile(`^\d+ ok, \d+ warn, 0 unsafe$`).MatchString(lines[len(lines)-1]) {
			fail("want the checks, then their count, none unsafe")
		}
	case cmd == "version" && d.asJSON:
		if len(objs) != 1 || objs[0]["version"] == nil {
			fail("want one object, with the version")
		}
	case cmd == "version":
		if !strings.HasPrefix(out, "lockkit ") || len(lines) != 1 {
			fail("want one line, the version")
		}
	default:
		fail("the doc test does not know what this command should print: teach checkOutput")
	}
}

// globMatch matches a name against a SCAN pattern (*, ? and literal characters).
func globMatch(pattern, name string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(name)
}

// docMasks replace what differs between a doc's sample and a run: times, digests, host/pid,
// durations, fences, the alignment of columns.
var docMasks = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "TIME"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d{3}\b`), "CLOCK"},
	{regexp.MustCompile(`\b[0-9a-f]{12}\b`), "DIGEST"},
	{regexp.MustCompile(`DIGEST \S+/\d+`), "DIGEST HOST/PID"},
	{regexp.MustCompile(`(?m)^(\s*host\s+)\S+$`), "${1}HOST"},
	{regexp.MustCompile(`(?m)^(\s*pid\s+)\d+$`), "${1}PID"},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|s|µs)\b`), "DUR"},
	{regexp.MustCompile(`\b\d{15,}\b`), "FENCE"},
	{regexp.MustCompile(`  +`), "  "},
	{regexp.MustCompile(`(?m) +$`), ""},
}

func mask(s string) string {
	for _, m := range docMasks {
		s = m.re.ReplaceAllString(s, m.repl)
	}
	return s
}

// compareSample checks that the output has the shape of the doc's sample: the same lines once
// masked (for ls: the same header, and each sample row among the rows).
func compareSample(t *testing.T, c docCommand, d docArgs, out string) {
	t.Helper()
	got := strings.Split(mask(strings.TrimSuffix(out, "\n")), "\n")
	want := strings.Split(mask(strings.Join(c.sample, "\n")), "\n")
	if d.pos[0] == "ls" {
		rows := got[1:]
		for _, w := range want[1:] {
			if i := slices.Index(rows, w); i >= 0 {
				rows = slices.Delete(rows, i, i+1)
			} else {
				t.Errorf("%s: the sample's row\n%s\nis not among the output's rows", c.where, w)
			}
		}
		got, want = got[:1], want[:1]
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: lockkit %s: output does not have the sample's shape (masked):\n--- got\n%s\n--- sample\n%s",
			c.where, strings.Join(d.args, " "), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// runDocWatch runs a watch command line. With a sample, it makes each event of the sample happen
// in turn and compares each line; without, it checks the first line. Then it interrupts the
// command, which must exit with 0.
func runDocWatch(t *testing.T, bin string, fx *docFixture, c docCommand, d docArgs) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, d.args...)
	cmd.Env = d.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if ok {
				return l
			}
		case <-time.After(15 * time.Second):
		}
		t.Fatalf("%s: lockkit %s: no more output; stderr:\n%s", c.where, strings.Join(d.args, " "), &stderr)
		return ""
	}
	name := d.pos[1]
	if c.sample == nil {
		first := next()
		var ev struct{ Event string }
		if d.asJSON && (json.Unmarshal([]byte(first), &ev) != nil || ev.Event != "state") ||
			!d.asJSON && !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} state `).MatchString(first) {
			t.Errorf("%s: first line %q, want the state", c.where, first)
		}
	}
	for _, want := range c.sample {
		if f := strings.Fields(want); len(f) > 1 {
			fx.act(t, f[1], name)
		}
		if got := next(); mask(got) != mask(want) {
			t.Errorf("%s: watch said\n%s\nwant the shape of\n%s", c.where, got, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // the rest, if any
	}
	if err := cmd.Wait(); err != nil || stderr.Len() > 0 {
		t.Errorf("%s: watch interrupted: %v, want exit 0; stderr:\n%s", c.where, err, &stderr)
	}
}

// act makes a watch event happen to the lock name.
func (fx *docFixture) act(t *testing.T, event, name string) {
	t.Helper()
	switch event {
	case "state", "free": // what it finds; what follows an expiry or release
	case "expired":
		n, ok := fx.holders[name]
		if !ok {
			t.Fatalf("no holder of %s whose network the test can cut", name)
		}
		n.Cut()
	case "acquired":
		c, _, _ := fx.client(t, "")
		if _, err := c.Acquire(context.Background(), name, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal(errors.New("the doc test cannot make a " + event + " event happen: teach docFixture.act"))
	}
}

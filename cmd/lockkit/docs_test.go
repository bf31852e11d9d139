package main_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
)

// The lockkit command lines the docs show are run, as the docs show them, against a real server
// holding what the docs describe (docFixture): TestDocs_commands runs those for one server,
// TestCLI_cluster those with --cluster. Each must exit 0 and print what its command promises; where
// a doc shows the output, the output has its shape (docShape).

// docFiles are the files whose commands are run: README.md and every file of docs/.
func docFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("docs: %v %v", files, err)
	}
	return append([]string{"../../README.md"}, files...)
}

// docCommand is a command line found in a doc.
type docCommand struct {
	where  string   // file:line
	text   string   // as the doc shows it
	words  []string // split as sh would
	env    []string // set by "export" lines before it in the same block
	sample []string // the output the doc shows under it (console blocks), if any
	block  int      // the number of its fenced block in the file (0: inline)
	err    error    // why it cannot be split into words
}

// cliBlocks keeps the commands of the fenced blocks that show the lockkit command (a block with a
// "lockkit" line): every line of such a block is run or listed in skipDoc. Other blocks (go get,
// make, go test) are not this test's business.
func cliBlocks(cmds []docCommand) []docCommand {
	cli := map[int]bool{}
	for _, c := range cmds {
		if len(c.words) > 0 && c.words[0] == "lockkit" {
			cli[c.block] = true
		}
	}
	var out []docCommand
	for _, c := range cmds {
		if cli[c.block] {
			out = append(out, c)
		}
	}
	return out
}

// skipDoc lists the command lines of the docs that are not run, with the reason.
var skipDoc = map[string]string{
	"go install github.com/lockkit/lockkit/cmd/lockkit@latest": "installs from the network; the tests run the binary built from this checkout",
	"make cli":                        "installs from a checkout; TestReadme_cliFromAFreshClone runs it in a fresh clone",
	"cd ../lockkit":                   "part of the install from a checkout, which TestReadme_cliFromAFreshClone runs",
	"lockkit watch":                   "prose naming the command, not a command line",
	"lockkit release --force":         "prose naming the command, not a command line",
	"lockkit ls --json | jq -r .name": "a pipeline into jq; TestJSON_lines parses lockkit ls --json itself",
}

// placeholders stand, in the docs' command lines, for values the reader fills in; the test fills
// them in from the fixture (KEY and HEX: the hash of a stored idempotency record).
func placeholders(fx *docFixture) map[string]string {
	return map[string]string{"NAME": "invoice:42", "PATTERN": "invoice:*", "SCOPE": "http-idem",
		"KEY": fx.idemHash, "HEX": fx.idemHash, "CMD": "inspect", "COMMAND": "inspect"}
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)\\s*([a-z]*)")
	inlineCode = regexp.MustCompile("`(lockkit [a-z][a-z-]*(?:[ \n][^`]*)?)`")
)

// readDocCommands returns the command lines of a doc: every line of a sh (shell, bash) block, the
// "$ " lines of any other block (the lines under one are its sample output), and the inline code
// spans that start with "lockkit ".
func readDocCommands(t *testing.T, file string) []docCommand {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(file, "../../")
	var (
		out   []docCommand
		prose strings.Builder
		lang  string
		in    bool
		env   []string
		first int // index in out of the current block's first command
		block int // the current block's number
	)
	for i, line := range strings.Split(string(b), "\n") {
		where := fmt.Sprintf("%s:%d", name, i+1)
		if m := fence.FindStringSubmatch(line); m != nil {
			in, lang, env, first = !in, m[2], nil, len(out)
			if in {
				block++
			}
			prose.WriteString("\n")
			continue
		}
		if !in {
			prose.WriteString(line + "\n")
			continue
		}
		prose.WriteString("\n") // keeps the prose's line numbers
		text, isCmd := strings.CutPrefix(line, "$ ")
		shell := lang == "sh" || lang == "shell" || lang == "bash"
		switch {
		case shell && !isCmd:
			text, isCmd = strings.TrimSpace(line), strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#")
		case !isCmd:
			if n := len(out); n > first {
				out[n-1].sample = append(out[n-1].sample, line)
			}
			continue
		}
		if !isCmd {
			continue
		}
		words, err := shellWords(text)
		c := docCommand{where: where, text: strings.Join(words, " "), words: words, env: env, block: block}
		if err != nil {
			c.text, c.err = text, err
		}
		if len(words) == 2 && words[0] == "export" && strings.Contains(words[1], "=") {
			env = append(append([]string(nil), env...), words[1])
			continue
		}
		out = append(out, c)
	}
	out = cliBlocks(out)
	text := prose.String()
	for _, m := range inlineCode.FindAllStringSubmatchIndex(text, -1) {
		span := strings.Join(strings.Fields(text[m[2]:m[3]]), " ")
		where := fmt.Sprintf("%s:%d", name, strings.Count(text[:m[0]], "\n")+1)
		words, err := shellWords(span)
		out = append(out, docCommand{where: where, text: span, words: words, err: err})
	}
	return out
}

// shellWords splits a command line as sh does, for what the docs use: words, '…' and "…" quotes,
// backslash escapes and # comments. Other shell syntax is refused (the test cannot run it).
func shellWords(s string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		has   bool
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == '\'' || (quote == '"' && r != '\\' && r != '$' && r != '`'):
			word.WriteRune(r)
		case quote == 0 && (r == '\'' || r == '"'):
			quote, has = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			word.WriteRune(rs[i])
			has = true
		case quote == 0 && (r == ' ' || r == '\t'):
			if has {
				words = append(words, word.String())
				word.Reset()
				has = false
			}
		case quote == 0 && r == '#' && !has:
			i = len(rs)
		case strings.ContainsRune("|;&<>$`()", r):
			return words, fmt.Errorf("shell syntax %q the doc test cannot run: add the line to skipDoc with a reason", r)
		default:
			word.WriteRune(r)
			has = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if has {
		words = append(words, word.String())
	}
	return words, nil
}

// allDocCommands reads every doc's commands, and checks that the main ones were found (a fence
// whose syntax the reader stopped recognizing would otherwise skip them silently).
func allDocCommands(t *testing.T) []docCommand {
	var all []docCommand
	for _, f := range docFiles(t) {
		all = append(all, readDocCommands(t, f)...)
	}
	count := map[string]int{}
	for _, c := range all {
		file, _, _ := strings.Cut(c.where, ":")
		count[file]++
		if c.sample != nil {
			count[file+" samples"]++
		}
	}
	for what, min := range map[string]int{"README.md": 5, "docs/troubleshooting.md": 10, "docs/troubleshooting.md samples": 4} {
		if count[what] < min {
			t.Errorf("%s: found %d command lines, want at least %d (did a fence change?)", what, count[what], min)
		}
	}
	return all
}

// TestDocs_commands runs every command line of the docs that is meant for one server.
func TestDocs_commands(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	runDocCommands(t, bin, singleTarget(srv), func(c docCommand) bool { return !isCluster(c) })
}

func isCluster(c docCommand) bool {
	for _, w := range c.words {
		if w == "--cluster" {
			return true
		}
	}
	return false
}

// runDocCommands runs the doc commands that pick selects against target, each on a fresh
// fixture. A command line that is neither a lockkit command nor in skipDoc fails the test.
func runDocCommands(t *testing.T, bin string, target docTarget, pick func(docCommand) bool) {
	cmds := append(allDocCommands(t), helpExamples(t, bin)...)
	ran := 0
	for _, c := range cmds {
		if reason, ok := skipDoc[c.text]; ok {
			t.Logf("%s: skipped %q: %s", c.where, c.text, reason)
			continue
		}
		if c.err != nil {
			t.Errorf("%s: %q: %v", c.where, c.text, c.err)
			continue
		}
		if len(c.words) < 2 || c.words[0] != "lockkit" {
			t.Errorf("%s: %q is not a lockkit command line the test can run: add it to skipDoc with a reason", c.where, c.text)
			continue
		}
		if !pick(c) {
			continue
		}
		ran++
		t.Run(c.where, func(t *testing.T) {
			fx := newDocFixture(t, target)
			runDocCommand(t, bin, target, fx, c)
		})
	}
	t.Logf("ran %d doc command lines", ran)
}

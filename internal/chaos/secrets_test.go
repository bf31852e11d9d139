package chaos_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Owner tokens are 128 random bits: 32 hex digits, never repeated, every bit set about half the time.
func TestSecurity_tokensAre128RandomBits(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const n = 4000
	seen := map[string]bool{}
	var ones [128]int
	for i := range n {
		l, err := c.TryAcquire(ctx, "tok-"+itoa(i%50), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tok := l.Token()
		b, err := hex.DecodeString(tok)
		if err != nil || len(b) != 16 || strings.ToLower(tok) != tok {
			t.Fatalf("token %q is not 32 lower-case hex digits", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
		for j := range 128 {
			if b[j/8]>>(7-j%8)&1 == 1 {
				ones[j]++
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each bit is a fair coin: n/2 ± 5 standard deviations (a false alarm every ~10^5 runs of 128 bits).
	sd := math.Sqrt(n) / 2
	total := 0
	for j, k := range ones {
		total += k
		if math.Abs(float64(k)-n/2) > 5*sd {
			t.Errorf("bit %d set in %d of %d tokens", j, k, n)
		}
	}
	t.Logf("%d tokens, %d distinct, %.4f of bits set", n, len(seen), float64(total)/(128*n))
}

// moduleRoot returns the repository root: the directory of the root module's go.mod (this test
// runs in the nested module internal/chaos).
func moduleRoot(t *testing.T) string {
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/lockkit/lockkit\n") {
			return dir
		}
	}
	t.Fatal("the root module's go.mod not found")
	return ""
}

// No string built at run time reaches Redis as Lua: in the module's non-test code, every
// redis.NewScript takes the text of an embedded .lua file, and Eval/EvalRO are never called with a
// script that is not a constant.
func TestSecurity_noLuaBuiltFromStrings(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	scripts := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			switch sel.Sel.Name {
			case "NewScript":
				scripts++
				if !fromEmbed(call.Args[0]) {
					t.Errorf("%s: NewScript(%s) is not the text of an embedded file", fset.Position(call.Pos()), exprText(call.Args[0]))
				}
			case "Eval", "EvalRO":
				if len(call.Args) > 1 {
					if _, lit := call.Args[1].(*ast.BasicLit); !lit {
						t.Errorf("%s: %s with a non-constant script", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scripts == 0 {
		t.Fatal("no NewScript call found: the check looks in the wrong place")
	}
}

// fromEmbed reports whether e cannot be script text formatted at run time: not a concatenation,
// not a call into fmt or a string-replacing function. (Which text core sends is checked by
// TestSecurity_scriptsAreEmbeddedFiles.)
func fromEmbed(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BinaryExpr:
		return false
	case *ast.CallExpr:
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "fmt" || pkg.Name == "strings" && sel.Sel.Name != "TrimSpace") {
				return false
			}
		}
		for _, a := range x.Args {
			if !fromEmbed(a) {
				return false
			}
		}
	}
	return true
}

func exprText(e ast.Expr) string {
	switch e.(type) {
	case *ast.BinaryExpr:
		return "a concatenation"
	case *ast.CallExpr:
		return "a formatting call"
	}
	return "an expression"
}

// scriptLog is a go-redis hook that records the script text and SHA1s a client sends.
type scriptLog struct {
	mu     sync.Mutex
	bodies map[string]bool
	shas   map[string]bool
}

func (s *scriptLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.record(cmd)
		return next(ctx, cmd)
	}
}
func (s *scriptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			s.record(c)
		}
		return next(ctx, cmds)
	}
}

func (s *scriptLog) record(cmd redis.Cmder) {
	a := cmd.Args()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch name := strings.ToLower(fmt.Sprint(a[0])); {
	case (name == "eval" || name == "eval_ro") && len(a) > 1:
		s.bodies[fmt.Sprint(a[1])] = true
	case (name == "evalsha" || name == "evalsha_ro") && len(a) > 1:
		s.shas[fmt.Sprint(a[1])] = true
	case name == "script" && len(a) > 2 && strings.EqualFold(fmt.Sprint(a[1]), "load"):
		s.bodies[fmt.Sprint(a[2])] = true
	}
}

// Every script core and package election send is made of their embedded .lua files, whole and
// unchanged, whatever the lock names and values: no user string reaches the text of a script. A
// core script's text is its entry file with the parts it includes in their place
// (core/internal/script), after the lines that name its KEYS and ARGV: every other line is a line
// of an embedded file, and the directive lines are the only ones left out. The workloads are those
// of the ACL tests: locks, permits, Inspect and ForceRelease.
func TestSecurity_scriptsAreEmbeddedFiles(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "core", "internal", "script", "lua")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.lua"))
	election, _ := filepath.Glob(filepath.Join(moduleRoot(t), "election", "*.lua"))
	paths = append(paths, election...)
	lines := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "--! ") {
				lines[l] = true
			}
		}
	}
	if len(paths) == 0 {
		t.Fatal("no core/internal/script/lua/*.lua files")
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	log := &scriptLog{bodies: map[string]bool{}, shas: map[string]bool{}}
	rdb.AddHook(log)
	for i := range 2 {
		if i == 1 {
			srv.Flush(t)
			srv.Do(t, "SCRIPT", "FLUSH") // NOSCRIPT again: the texts are sent once more
		}
		for _, w := range []func(ctx context.Context, rdb, admin redis.UniversalClient) error{
			func(ctx context.Context, rdb, _ redis.UniversalClient) error { return aclWorkload(ctx, rdb) },
			permitsWorkload, inspectWorkload, forceReleaseWorkload,
		} {
			if err := w(context.Background(), rdb, rdb); err != nil {
				t.Fatal(err)
			}
		}
	}
	known := map[string]bool{}
	for body := range log.bodies {
		for i, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			if !lines[l] && !(i < 4 && bindingRE.MatchString(l)) { // (KEYS, then ARGV: one or two lines each)
				t.Errorf("script text is not made of embedded files: line %d %q of\n%.300s", i+1, l, body)
				break
			}
		}
		known[fmt.Sprintf("%x", sha1.Sum([]byte(body)))] = true
	}
	for sha := range log.shas {
		if !known[sha] {
			t.Errorf("EVALSHA %s of a script whose text was never sent", sha)
		}
	}
	if len(log.bodies) < 5 {
		t.Fatalf("only %d scripts seen", len(log.bodies))
	}
	t.Logf("%d scripts, %d SHA1s, all made of core/internal/script/lua and election files", len(log.bodies), len(log.shas))
}

// bindingRE matches the lines that bind a script's KEYS or ARGV to the names its header declares.
// (core/internal/script's bind: the table read once into KEYS_ or ARGV_, and the names indexes of
// it; a last name may take the rest, as a table: KEYS itself, or {unpack(ARGV, n)} after one
// unpack of the names before it.)
var bindingRE = regexp.MustCompile(`^local ((KEYS|ARGV)_ = (KEYS|ARGV)|[ka]_[a-z_]+(, [ka]_[a-z_]+)* = ` +
	`(KEYS|ARGV|unpack\((KEYS|ARGV), 1, \d+\)|\{unpack\((KEYS|ARGV), \d+\)\}|(KEYS|ARGV)_\[1\](, (KEYS|ARGV)_\[\d+\])*))$`)

// Errors never carry the owner token or the full Redis key, whatever went wrong.
func TestSecurity_errorsCarryNoTokenOrKey(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "secret-name", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok, key := l.Token(), l.Key()
	var errs []error
	_, err = c.TryAcquire(ctx, "secret-name", time.Second)
	errs = append(errs, err)
	_, err = c.Acquire(ctx, "secret-name", time.Second, core.WithWait(20*time.Millisecond))
	errs = append(errs, err)
	rdb.Del(ctx, key) // behind the holder's back
	errs = append(errs, l.Extend(ctx, time.Second), l.Release(ctx), context.Cause(l.Context()))
	_, err = l.TTL(ctx)
	errs = append(errs, err)
	g, err := c.Acquire(ctx, "secret-name", time.Second, core.WithGuard("lockkit:done:{secret-name}"))
	if err != nil {
		t.Fatal(err)
	}
	gtok := g.Token()
	_ = g.ReleaseSet(ctx, "lockkit:done:{secret-name}", []byte("v"), time.Minute)
	_, err = c.Acquire(ctx, "secret-name", time.Second, core.WithGuard("lockkit:done:{secret-name}"))
	errs = append(errs, err)
	srv.Stop(t)
	_, err = c.TryAcquire(ctx, "secret-name", time.Second)
	errs = append(errs, err, c.Close(ctx))
	rl, err := core.NewRedlock([]redis.UniversalClient{rdb, rdb, rdb})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rl.TryAcquire(ctx, "secret-name", time.Second)
	errs = append(errs, err, rl.Close(ctx))
	for i, err := range errs {
		if err == nil {
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, tok) || strings.Contains(msg, gtok) || strings.Contains(msg, key) {
			t.Errorf("error %d carries the token or the key: %v", i, msg)
		}
	}
	if errors.Is(errs[0], core.ErrNotAcquired) && !strings.Contains(errs[0].Error(), "secret-name") {
		t.Errorf("errors name the lock (not its key): %v", errs[0])
	}
}

package core

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// A script whose own file starts with a shebang gets that line first, before the shared files it
// is assembled with (Redis reads a script's flags only from its first line); the rest is the files,
// whole, in order.
func TestMustScript_shebangFirst(t *testing.T) {
	read := func(name string) string {
		b, err := luaFiles.ReadFile("lua/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, names := range [][]string{
		{"lib.lua", "lock_lib.lua", "fair_lib.lua", "inspect.lua"},
		{"pttl.lua"},
		{"lib.lua", "sem_lib.lua", "sem_pttl.lua"},
	} {
		last := read(names[len(names)-1])
		shebang, body, ok := strings.Cut(last, "\n")
		if !ok || shebang != "#!lua flags=no-writes" {
			t.Fatalf("%s starts with %q, want the no-writes flag", names[len(names)-1], shebang)
		}
		want := shebang + "\n"
		for _, n := range names[:len(names)-1] {
			want += read(n)
		}
		want += body
		sum := sha1.Sum([]byte(want))
		if got := mustScript(names...).Hash(); got != hex.EncodeToString(sum[:]) {
			t.Errorf("%v: hash %s, want the shebang first and the files whole", names, got)
		}
	}
	// The scripts that write carry no flags line (their text is the files, whole).
	want := read("lib.lua") + read("lock_lib.lua") + read("fair_lib.lua") + read("force_release.lua")
	sum := sha1.Sum([]byte(want))
	if got := mustScript("lib.lua", "lock_lib.lua", "fair_lib.lua", "force_release.lua").Hash(); got != hex.EncodeToString(sum[:]) {
		t.Errorf("force_release: hash %s, want the files whole", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a shebang in a file that is not the script's last was accepted")
		}
	}()
	mustScript("inspect.lua", "lib.lua")
}

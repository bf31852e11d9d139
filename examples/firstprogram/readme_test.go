package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADME_quotesThisProgram checks that the repository's README quotes main.go as it is (from
// its package clause on), so that the first program a reader copies is the one CI runs.
func TestREADME_quotesThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	i := strings.Index(code, "package main\n")
	if i < 0 {
		t.Fatal("main.go has no package clause")
	}
	if quote := "```go\n" + code[i:] + "```\n"; !strings.Contains(string(readme), quote) {
		t.Errorf("README.md does not quote examples/firstprogram/main.go from its package clause on; "+
			"paste this block into its first-program section:\n%s", quote)
	}
}

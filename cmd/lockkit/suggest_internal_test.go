package main

import "testing"

// A misspelled or guessed command gets the command it most likely meant (#47: "force-release" and
// "inpsect" listed the commands but suggested none); a word close to none gets no suggestion.
func TestSuggestCommand(t *testing.T) {
	for in, want := range map[string]string{
		"inpsect": "inspect", "insepct": "inspect", "Inspect": "inspect", "ls": "ls", "lss": "ls",
		"list": "ls", "force-release": "release --force", "forcerelease": "release --force",
		"relase": "release --force", "unlock": "release --force", "wacth": "watch", "whatch": "watch",
		"verison": "version", "--version": "version", "hepl": "help", "idme": "idem",
		"bogus": "", "x": "", "doit": "", "": "",
	} {
		if got := suggestCommand(in); got != want {
			t.Errorf("suggestCommand(%q) = %q, want %q", in, got, want)
		}
	}
}

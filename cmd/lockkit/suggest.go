package main

import "strings"

// suggestCommand returns the command line a misspelled or guessed command most likely meant
// ("release --force" for force-release, "inspect" for inpsect), or "" when none is close: as the
// hint after a free name suggests its namesake in a namespace, for commands.
func suggestCommand(name string) string {
	word := strings.ToLower(strings.Trim(name, "-"))
	switch strings.NewReplacer("-", "", "_", "").Replace(word) {
	case "forcerelease", "force", "unlock", "delete", "del", "rm", "remove", "kill", "break", "steal":
		return "release --force"
	case "list", "dir", "locks", "all":
		return "ls"
	case "show", "info", "get", "status", "stat", "holder", "who", "describe":
		return "inspect"
	case "tail", "follow", "monitor", "events":
		return "watch"
	}
	best, bestDist := "", 0
	for _, c := range commands() {
		d := editDistance(word, c.name)
		if d > max(1, len(c.name)/3) {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = c.name, d
		}
	}
	if best == "release" {
		return "release --force"
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b: insertions, deletions,
// substitutions and swaps of two adjacent bytes each cost 1 (inpsect is 1 from inspect).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

// buildInfo is what version prints: what the Go toolchain recorded in the binary.
type buildInfo struct {
	Version  string `json:"version"`            // the module version, "(devel)" from a checkout
	Commit   string `json:"commit,omitempty"`   // vcs.revision
	Time     string `json:"time,omitempty"`     // vcs.time, the commit's
	Modified bool   `json:"modified,omitempty"` // vcs.modified: uncommitted changes
	Go       string `json:"go"`
}

// readBuildInfo reads the binary's build information.
func readBuildInfo() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildInfo{Version: "unknown"}
	}
	v := buildInfo{Version: bi.Main.Version, Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

func setupVersion(*flag.FlagSet) runner {
	return func(_ context.Context, e *env, _ []string) error {
		v := readBuildInfo()
		if e.json {
			return printJSON(e.out, v)
		}
		line := "lockkit " + v.Version
		if v.Commit != "" {
			line += " commit " + v.Commit
			if v.Modified {
				line += " (modified)"
			}
			if v.Time != "" {
				line += " of " + v.Time
			}
		}
		_, err := fmt.Fprintf(e.out, "%s %s\n", line, v.Go)
		return err
	}
}

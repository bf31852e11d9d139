package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

// What "make cli" stamps into the binary with -ldflags -X (git describe, git rev-parse HEAD, the
// commit's time, "true" when the tree had uncommitted changes): set at link time, never written at
// run time. They win over what the Go toolchain recorded, which is nothing of the checkout when
// VCS stamping is off (GOFLAGS=-buildvcs=false, or "auto" in a go.work workspace).
var (
	stampVersion  string
	stampCommit   string
	stampTime     string
	stampModified string
)

// unstamped is what version says when it knows neither a module version nor a commit.
const unstamped = "version unknown: built without VCS stamping; build with make cli"

// buildInfo is what version prints: what the Go toolchain recorded in the binary, or what
// "make cli" stamped.
type buildInfo struct {
	Version  string `json:"version"`            // the module version, "(devel)" from a checkout
	Commit   string `json:"commit,omitempty"`   // vcs.revision
	Time     string `json:"time,omitempty"`     // vcs.time, the commit's
	Modified bool   `json:"modified,omitempty"` // vcs.modified: uncommitted changes
	Go       string `json:"go"`
	Unknown  string `json:"unknown,omitempty"` // why neither version nor commit is known
}

// readBuildInfo reads the binary's build information.
func readBuildInfo() buildInfo {
	v := buildInfo{Version: "(devel)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Go = bi.GoVersion
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
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
	}
	if stampCommit != "" {
		v.Commit, v.Time, v.Modified = stampCommit, stampTime, stampModified == "true"
	}
	if stampVersion != "" {
		v.Version = stampVersion
	}
	if v.Version == "(devel)" && v.Commit == "" {
		v.Unknown = unstamped
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
		line += " " + v.Go
		if v.Unknown != "" {
			line += " (" + v.Unknown + ")"
		}
		_, err := fmt.Fprintln(e.out, line)
		return err
	}
}

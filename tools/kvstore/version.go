package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{name: "version", summary: "print the module version and VCS revision",
		long:  "Prints the kvstore module's version, the VCS revision and time it was built from\n(when the build recorded them: go build's -buildvcs) and the Go version.",
		setup: noFlags(runVersion)})
}

// versionOutput is version's JSON.
type versionOutput struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// buildVersion reads the binary's build information.
func buildVersion() versionOutput {
	v := versionOutput{Module: "github.com/kvstore/kvstore", Version: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module, v.Version = bi.Main.Path, bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// version is the one line --version and version print.
func version() string {
	v := buildVersion()
	var b strings.Builder
	fmt.Fprintf(&b, "kvstore %s (%s)", v.Version, v.Module)
	if v.Revision != "" {
		fmt.Fprintf(&b, " revision %s", v.Revision)
		if v.Modified {
			b.WriteString("+dirty")
		}
		if v.Time != "" {
			fmt.Fprintf(&b, " %s", v.Time)
		}
	} else {
		b.WriteString(" revision unknown (built without VCS stamping)")
	}
	fmt.Fprintf(&b, " %s", v.Go)
	return b.String()
}

func runVersion(_ context.Context, e *env, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	v := buildVersion()
	if e.json {
		return encodeJSON(e.stdout, v)
	}
	_, err := fmt.Fprintln(e.stdout, version())
	return err
}

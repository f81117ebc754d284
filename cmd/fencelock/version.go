package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version may be set at link time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/fencelock
var version string

func (c *cli) version(ctx context.Context, args []string) int {
	cmd := c.command("version", "", "Print fencelock's version, VCS revision and Go version.", "  0    success\n  2    usage error: version takes no arguments\n")
	pos, _, dashes, err := cmd.parse(args)
	if err == nil && (len(pos) > 0 || dashes) {
		err = usageErrorf("version takes no arguments")
	}
	if err != nil {
		return cmd.exit(err)
	}
	fmt.Fprintln(c.stdout, versionString(buildInfo(), version))
	return exitOK
}

// buildInfo is the binary's build information, nil if it has none.
func buildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// versionString says where the binary came from: the version linked in,
// else the module version go install fetched (or go build stamped from a
// tag), then the VCS revision go build saw in a clone, then the Go
// version. "(devel)" stands for the version only when neither a version
// nor a revision is known (a build with -buildvcs=false, say).
func versionString(bi *debug.BuildInfo, linked string) string {
	v, rev, goVersion := linked, "", ""
	if bi != nil {
		goVersion = bi.GoVersion
		if v == "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					rev += "-dirty"
				}
			}
		}
	}
	s := "fencelock"
	switch {
	case v != "" && rev != "":
		s += " " + v + " " + rev
	case v != "":
		s += " " + v
	case rev != "":
		s += " " + rev
	default:
		s += " (devel)"
	}
	if goVersion != "" {
		s += " " + goVersion
	}
	return s
}

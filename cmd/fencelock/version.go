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
	fmt.Fprintln(c.stdout, versionString())
	return exitOK
}

func versionString() string {
	v, rev, goVersion := version, "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "" {
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
	if v == "" {
		v = "(devel)"
	}
	s := "fencelock " + v
	if rev != "" {
		s += " " + rev
	}
	if goVersion != "" {
		s += " " + goVersion
	}
	return s
}

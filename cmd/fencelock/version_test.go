package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// The version says where the binary came from: the release tag that go
// install fetched, else the commit that go build saw, else "(devel)".
func TestVersionString(t *testing.T) {
	const rev = "5d68fe7c0a7f2b3e4d5c6b7a8f9e0d1c2b3a4f5e"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name   string
		bi     *debug.BuildInfo
		linked string
		want   string
	}{
		{"installed from a tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}}, "",
			"fencelock v0.1.0 go1.26.8"},
		{"built from a clean clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "",
			"fencelock " + rev + " go1.26.8"},
		{"built from a modified clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "",
			"fencelock " + rev + "-dirty go1.26.8"},
		{"built at a tag from a clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}, Settings: vcs("false")}, "",
			"fencelock v0.1.0 " + rev + " go1.26.8"},
		{"built with -buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "",
			"fencelock (devel) go1.26.8"},
		{"built with -buildvcs=false, version linked in", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "v0.1.0",
			"fencelock v0.1.0 go1.26.8"},
		{"no build information", nil, "", "fencelock (devel)"},
	} {
		if got := versionString(tc.bi, tc.linked); got != tc.want {
			t.Errorf("%s: versionString = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// --version is the version command, as most CLIs spell it.
func TestVersion_flag(t *testing.T) {
	want := versionString(buildInfo(), version) + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		h := newHarness(t)
		if got := h.run(args...); got != 0 {
			t.Fatalf("fencelock %s: exit = %d, want 0", strings.Join(args, " "), got)
		}
		if got := h.stdout.String(); got != want {
			t.Errorf("fencelock %s printed %q, want %q", strings.Join(args, " "), got, want)
		}
	}
	h := newHarness(t)
	if got := h.run("--version", "extra"); got != exitUsage {
		t.Errorf("fencelock --version extra: exit = %d, want %d", got, exitUsage)
	}
}

package releasetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/release tags nothing and changes nothing when the tree is not
// clean, CI's pass is not stated for HEAD, or the version is not one.
func TestRelease_refuses(t *testing.T) {
	src := repoRoot(t)
	clone := filepath.Join(t.TempDir(), "clone")
	run(t, "", nil, "git", "clone", "-q", src, clone)
	head := strings.TrimSpace(run(t, clone, nil, "git", "rev-parse", "HEAD"))
	for _, tc := range []struct {
		name  string
		dirty bool
		args  []string
		want  string
	}{
		{"no statement that CI passed", false, []string{"v0.1.0"}, "say that CI passed on HEAD"},
		{"CI passed on another commit", false, []string{"v0.1.0", "--ci-passed=HEAD~1"}, "not HEAD"},
		{"not a version", false, []string{"0.1", "--ci-passed=HEAD"}, "not a semantic version"},
		{"a major version that needs a /v2 path", false, []string{"v2.0.0", "--ci-passed=HEAD"}, "not a semantic version"},
		{"a tree with uncommitted changes", true, []string{"v0.1.0", "--ci-passed=HEAD"}, "not clean"},
	} {
		if tc.dirty {
			if err := os.WriteFile(filepath.Join(clone, "stray.txt"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("scripts/release", tc.args...)
		cmd.Dir = clone
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: scripts/release %s: err = %v, output %q; want a failure saying %q", tc.name, strings.Join(tc.args, " "), err, out, tc.want)
		}
		if tags := strings.TrimSpace(run(t, clone, nil, "git", "tag", "--points-at", "HEAD")); tags != "" {
			t.Errorf("%s: scripts/release tagged %q, want no tag", tc.name, tags)
		}
		if got := strings.TrimSpace(run(t, clone, nil, "git", "rev-parse", "HEAD")); got != head {
			t.Errorf("%s: HEAD moved to %s, want %s", tc.name, got, head)
		}
		if st := run(t, clone, nil, "git", "status", "--porcelain"); tc.dirty && st != "?? stray.txt\n" || !tc.dirty && st != "" {
			t.Errorf("%s: git status after scripts/release = %q, want the tree as it was", tc.name, st)
		}
	}
}

// No go.mod has a replace directive: a consumer's build ignores them, and
// go install …@version refuses a module that has one.
func TestNoReplace(t *testing.T) {
	src := repoRoot(t)
	for _, name := range split0(run(t, src, nil, "git", "ls-files", "-z", "-c", "-o", "--exclude-standard", "*go.mod")) {
		data, err := os.ReadFile(filepath.Join(src, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "replace" {
				t.Errorf("%s:%d: %q: want no replace directive (the root go.work builds the modules together)", name, i+1, line)
			}
		}
	}
}

package releasetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

const root = "github.com/fencelock/fencelock"

// published are the modules that scripts/release tags, by directory, in
// the order it tags them.
var published = []string{"", "fence/sqlfence", "fence/grpcfence", "fence/s3fence", "fenceprom", "fenceotel", "cmd/fencelock"}

// TestRelease_localProxy releases the tree as the next version in a
// clone, serves the tags from a file-based module proxy, and then, with
// no other source of fencelock modules and no network (GOPROXY is that
// proxy and the local module cache as a second file proxy), installs the
// CLI with go install …@vNEXT and builds a fresh consumer of every
// published module with go get.
func TestRelease_localProxy(t *testing.T) {
	start := time.Now()
	src := repoRoot(t)
	tmp := t.TempDir()
	clone := filepath.Join(tmp, "clone")
	run(t, "", nil, "git", "clone", "-q", src, clone)
	overlay(t, src, clone)

	next := nextVersion(t, clone)
	t.Logf("releasing %s", next)
	out := run(t, clone, nil, "scripts/release", next, "--ci-passed=HEAD")
	t.Logf("scripts/release %s:\n%s", next, out)

	tags := strings.Fields(run(t, clone, nil, "git", "tag", "--points-at", "HEAD"))
	var want []string
	for _, dir := range published {
		want = append(want, tagOf(dir, next))
	}
	if !sameSet(tags, want) {
		t.Fatalf("scripts/release tagged %q, want %q", tags, want)
	}

	proxy := filepath.Join(tmp, "proxy")
	for _, dir := range published {
		serve(t, proxy, clone, dir, next)
	}

	// The offline build takes every other module from the local module
	// cache; on a fresh machine this test can run before any other
	// module's, so the workspace's dependencies are downloaded first.
	run(t, src, nil, "go", "mod", "download")
	cache := strings.TrimSpace(run(t, "", nil, "go", "env", "GOMODCACHE"))
	gocache := strings.TrimSpace(run(t, "", nil, "go", "env", "GOCACHE"))
	gopath := filepath.Join(tmp, "gopath")
	offline := append(withoutGo(os.Environ()),
		"GOENV=off",
		"GOPATH="+gopath,
		"GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
		"GOCACHE="+gocache, // compiled packages only: every module comes from GOPROXY
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOSUMDB=off",
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)

	run(t, tmp, offline, "go", "install", root+"/cmd/fencelock@"+next)
	bin := filepath.Join(gopath, "bin", "fencelock")
	for _, arg := range []string{"version", "--version"} {
		got := strings.TrimSpace(run(t, "", nil, bin, arg))
		t.Logf("fencelock %s: %s", arg, got)
		if !strings.HasPrefix(got, "fencelock "+next+" ") {
			t.Errorf("fencelock %s installed from %s printed %q, want it to start %q", arg, next, got, "fencelock "+next+" ")
		}
	}

	consumer := filepath.Join(tmp, "consumer")
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(filepath.Join("testdata", "consumer", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(consumer, "main.go"), prog, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, consumer, offline, "go", "mod", "init", "example.com/consumer")
	get := []string{"get"}
	for _, dir := range published {
		if dir != "cmd/fencelock" {
			get = append(get, modPath(dir)+"@"+next)
		}
	}
	run(t, consumer, offline, "go", get...)
	run(t, consumer, offline, "go", "build", "-o", "consumer", ".")
	got := run(t, consumer, nil, filepath.Join(consumer, "consumer"))
	t.Logf("consumer:\n%s", got)
	for _, w := range []string{"fencelock: true", "sqlfence: true", "grpcfence: true", "s3fence: true", "fenceprom: true", "fenceotel: true"} {
		if !strings.Contains(got, w) {
			t.Errorf("consumer printed %q, want a line %q", got, w)
		}
	}
	listArgs := []string{"list", "-m", "-json"}
	for _, dir := range published[:len(published)-1] {
		listArgs = append(listArgs, modPath(dir))
	}
	list := run(t, consumer, offline, "go", listArgs...)
	for _, dir := range published[:len(published)-1] {
		if m := findModule(t, list, modPath(dir)); m.Version != next || m.Replace != nil {
			t.Errorf("consumer's build list has %s at %q (replaced: %v), want %s from the proxy", modPath(dir), m.Version, m.Replace != nil, next)
		}
	}

	// A consumer of sqlfence alone: the drivers its tests use must not
	// reach the consumer's go.sum (not even as go.mod hashes), since
	// sqlfence itself imports none.
	sqlConsumer := filepath.Join(tmp, "sqlconsumer")
	if err := os.MkdirAll(sqlConsumer, 0o755); err != nil {
		t.Fatal(err)
	}
	prog, err = os.ReadFile(filepath.Join("testdata", "sqlconsumer", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sqlConsumer, "main.go"), prog, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, sqlConsumer, offline, "go", "mod", "init", "example.com/sqlconsumer")
	run(t, sqlConsumer, offline, "go", "get", modPath("fence/sqlfence")+"@"+next)
	run(t, sqlConsumer, offline, "go", "mod", "tidy")
	run(t, sqlConsumer, offline, "go", "build", "-o", "sqlconsumer", ".")
	if got := run(t, sqlConsumer, nil, filepath.Join(sqlConsumer, "sqlconsumer")); !strings.Contains(got, "sqlfence: true") {
		t.Errorf("sqlfence consumer printed %q, want %q", got, "sqlfence: true")
	}
	sum, err := os.ReadFile(filepath.Join(sqlConsumer, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go.sum of a consumer of sqlfence alone:\n%s", sum)
	for _, driver := range []string{"modernc.org/", "github.com/go-sql-driver/", "github.com/jackc/"} {
		for line := range strings.Lines(string(sum)) {
			if strings.HasPrefix(line, driver) {
				t.Errorf("the go.sum of a consumer of sqlfence alone has %s, a module of sqlfence's tests only", strings.TrimSpace(line))
			}
		}
	}

	// From the clone, at the tag, the workspace builds the CLI with the
	// tag's version and revision stamped (no proxy needed: GOPROXY=off).
	fromClone := filepath.Join(tmp, "fencelock-from-clone")
	ws := append(withoutGo(os.Environ()), "GOENV=off", "GOPROXY=off", "GOFLAGS=-buildvcs=true", "GOTOOLCHAIN=local",
		"GOMODCACHE="+cache, "GOCACHE="+gocache, "GOPATH="+strings.TrimSpace(run(t, "", nil, "go", "env", "GOPATH")))
	run(t, filepath.Join(clone, "cmd", "fencelock"), ws, "go", "build", "-o", fromClone, ".")
	rev := strings.TrimSpace(run(t, clone, nil, "git", "rev-parse", "HEAD"))
	got = strings.TrimSpace(run(t, "", nil, fromClone, "version"))
	t.Logf("fencelock version, built in the clone: %s", got)
	if !strings.HasPrefix(got, "fencelock "+next+" "+rev+" ") {
		t.Errorf("fencelock built in the clone at %s printed %q, want it to start %q", next, got, "fencelock "+next+" "+rev+" ")
	}
	t.Logf("released, served, installed and built in %v", time.Since(start).Round(time.Second))
}

func modPath(dir string) string {
	if dir == "" {
		return root
	}
	return root + "/" + dir
}

func tagOf(dir, version string) string {
	if dir == "" {
		return version
	}
	return dir + "/" + version
}

// serve writes the module at dir, as tagged at version, to the file-based
// proxy: the GOPROXY protocol's list, .info, .mod and .zip files, the zip
// made from the tag as a proxy makes it (golang.org/x/mod/zip).
func serve(t *testing.T, proxy, clone, dir, version string) {
	t.Helper()
	path := modPath(dir)
	esc, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	tag := tagOf(dir, version)
	when := strings.TrimSpace(run(t, clone, nil, "git", "log", "-1", "--format=%cI", tag))
	ts, err := time.Parse(time.RFC3339, when)
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, ts.UTC()})
	if err != nil {
		t.Fatal(err)
	}
	gomod := filepath.ToSlash(filepath.Join(dir, "go.mod"))
	mod := run(t, clone, nil, "git", "show", tag+":"+gomod)
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := zip.CreateFromVCS(f, module.Version{Path: path, Version: version}, clone, tag, dir); err != nil {
		t.Fatalf("zip of %s@%s: %v", path, version, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"list": version + "\n", version + ".info": string(info), version + ".mod": mod} {
		if err := os.WriteFile(filepath.Join(at, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nextVersion is the version the nested modules require of the library
// (what the tree will be released as), or, if that is tagged already, the
// next minor version after the newest tag.
func nextVersion(t *testing.T, clone string) string {
	t.Helper()
	name := filepath.Join(clone, "cmd", "fencelock", "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := ""
	for _, r := range f.Require {
		if r.Mod.Path == root {
			next = r.Mod.Version
		}
	}
	if next == "" {
		t.Fatalf("%s does not require %s", name, root)
	}
	newest := ""
	for _, tag := range strings.Fields(run(t, clone, nil, "git", "tag", "-l", "v*")) {
		if semver.IsValid(tag) && semver.Compare(tag, newest) > 0 {
			newest = tag
		}
	}
	if newest != "" && semver.Compare(newest, next) >= 0 {
		var major, minor int
		if _, err := fmt.Sscanf(semver.MajorMinor(newest), "v%d.%d", &major, &minor); err != nil {
			t.Fatal(err)
		}
		next = fmt.Sprintf("v%d.%d.0", major, minor+1)
	}
	return next
}

// overlay commits the working tree's uncommitted changes to the clone, so
// that what is released is the tree under test.
func overlay(t *testing.T, src, clone string) {
	t.Helper()
	for _, name := range split0(run(t, src, nil, "git", "ls-files", "-z", "-m", "-o", "--exclude-standard")) {
		data, err := os.ReadFile(filepath.Join(src, name))
		if os.IsNotExist(err) {
			continue // deleted: below
		}
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(clone, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dst, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range split0(run(t, src, nil, "git", "ls-files", "-z", "-d")) {
		if err := os.Remove(filepath.Join(clone, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if strings.TrimSpace(run(t, clone, nil, "git", "status", "--porcelain")) != "" {
		run(t, clone, nil, "git", "add", "-A")
		run(t, clone, nil, "git", "commit", "-q", "-m", "The working tree under test")
	}
}

func split0(s string) []string {
	return slices.DeleteFunc(strings.Split(s, "\x00"), func(s string) bool { return s == "" })
}

// repoRoot is the top of the git work tree holding this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("not in a git work tree (git rev-parse: %v): nothing to release", err)
		}
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// run runs name with args in dir (the test's if empty) and env (the
// test's, plus a git identity, if nil), and returns its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env,
		"GIT_AUTHOR_NAME=fencelock release test", "GIT_AUTHOR_EMAIL=release-test@fencelock.invalid",
		"GIT_COMMITTER_NAME=fencelock release test", "GIT_COMMITTER_EMAIL=release-test@fencelock.invalid")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// withoutGo is env without the go command's variables, which the caller
// sets afresh.
func withoutGo(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "GO") && !strings.HasPrefix(kv, "GORACE=")
	})
}

type listed struct {
	Path    string
	Version string
	Replace *listed
}

func findModule(t *testing.T, list, path string) listed {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(list))
	for dec.More() {
		var m listed
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("%s is not in the build list", path)
	return listed{}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

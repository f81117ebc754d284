package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// connFlags are the flags that every command but demo and version takes,
// which docs/cli.md lists once rather than on each command's line.
var connFlags = []string{"--redis", "--prefix", "--timeout", "--tls", "--cacert", "--cert", "--key", "--sni", "--insecure"}

// readmeCommandLine returns the "Command line" section of docs/cli.md.
func readmeCommandLine(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Command line\n")
	if !ok {
		t.Fatal(`docs/cli.md has no "## Command line" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	return sec
}

var flagRE = regexp.MustCompile(`(?:^|[\s\[|(])(--?[a-zA-Z][a-z-]*)`)

// helpFlags returns the flags that "fencelock CMD -h" lists, each with
// its names (a short alias, the long name), and the environment
// variables it names.
func helpFlags(t *testing.T, cmd string) (flags [][]string, envs []string) {
	t.Helper()
	h := newHarness(t)
	if code := h.run(cmd, "-h"); code != 0 {
		t.Fatalf("fencelock %s -h: exit %d", cmd, code)
	}
	for line := range strings.Lines(h.stdout.String()) {
		if strings.HasPrefix(line, "  -") {
			fs := strings.Fields(strings.ReplaceAll(line, ",", ""))
			names := fs[:1]
			if len(fs) > 1 && strings.HasPrefix(fs[1], "--") {
				names = fs[:2]
			}
			flags = append(flags, names)
		}
		for _, m := range regexp.MustCompile(`\$([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(line, -1) {
			envs = append(envs, m[1])
		}
	}
	return flags, envs
}

// The docs/cli.md's synopsis of each command and each command's -h list the
// same flags (the connection flags once, in the paragraph after the
// synopsis, and in "fencelock -h"), and every environment variable a -h
// names is in docs/cli.md: they cannot drift apart unnoticed.
func TestDocs_flagsMatchHelp(t *testing.T) {
	t.Parallel()
	sec := readmeCommandLine(t)
	_, block, _ := strings.Cut(sec, "```sh\nfencelock run ")
	block, _, _ = strings.Cut("fencelock run "+block, "```")
	synopsis := map[string]string{}
	for line := range strings.Lines(block) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "fencelock" {
			synopsis[f[1]] = line
		}
	}
	_, common, _ := strings.Cut(sec, "Every command but `demo` and `version` also takes")
	common, _, _ = strings.Cut(common, "\n\n")
	top := newHarness(t)
	top.run("-h")

	// The commands are those "fencelock -h" lists, so a new one cannot
	// miss its synopsis.
	var cmds []string
	for line := range strings.Lines(top.stdout.String()) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "fencelock" && strings.HasPrefix(line, "  fencelock ") {
			cmds = append(cmds, f[1])
		}
	}
	if len(cmds) < 12 {
		t.Fatalf("fencelock -h lists %d commands: %v", len(cmds), cmds)
	}
	for _, cmd := range cmds {
		line, ok := synopsis[cmd]
		if !ok {
			t.Errorf("docs/cli.md's synopsis lacks fencelock %s", cmd)
			continue
		}
		if !strings.Contains(top.stdout.String(), "fencelock "+cmd+" ") {
			t.Errorf("fencelock -h lacks fencelock %s", cmd)
		}
		var listed []string
		for _, m := range flagRE.FindAllStringSubmatch(line, -1) {
			if m[1] != "--" {
				listed = append(listed, m[1])
			}
		}
		flags, envs := helpFlags(t, cmd)
		for _, names := range flags {
			f := names[len(names)-1]
			switch {
			case slices.Contains(connFlags, f) && cmd != "demo":
				if !regexp.MustCompile("`"+f+`\b`).MatchString(common) && !regexp.MustCompile(`\s`+f+`\b`).MatchString(common) {
					t.Errorf("fencelock %s -h has %s, which docs/cli.md's paragraph on the flags every command takes lacks", cmd, f)
				}
				if !strings.Contains(top.stdout.String(), "\n  "+f+" ") {
					t.Errorf("fencelock %s -h has %s, which fencelock -h's Connection lacks", cmd, f)
				}
			case !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(listed, n) }):
				t.Errorf("fencelock %s -h has %s, which docs/cli.md's synopsis lacks:\n%s", cmd, strings.Join(names, ", "), line)
			}
		}
		for _, f := range listed {
			if !slices.ContainsFunc(flags, func(names []string) bool { return slices.Contains(names, f) }) {
				t.Errorf("docs/cli.md's synopsis of fencelock %s has %s, which its -h lacks", cmd, f)
			}
		}
		for _, e := range envs {
			if !strings.Contains(sec, "`"+e+"`") {
				t.Errorf("fencelock %s -h names $%s, which docs/cli.md's Command line section lacks", cmd, e)
			}
		}
	}
}

// The "Tested servers" section of docs/operations.md names every package whose tests start
// servers (through internal/redistest), which make test runs once per
// server.
func TestDocs_testedServersNamesEveryServerPackage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "\n## Tested servers\n")
	para, _, _ := strings.Cut(sec, "\n\n|")
	para = strings.Join(strings.Fields(para), " ") // as wrapped anywhere
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root:
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(src), `"github.com/fencelock/fencelock/internal/redistest"`) {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dirs[filepath.ToSlash(rel)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("found only %v with tests that start servers", dirs)
	}
	for dir := range dirs {
		name := "`" + dir + "`"
		switch dir {
		case ".":
			name = "the root package"
		case "chaos":
			name = "the chaos suite"
		}
		if !strings.Contains(para, name) {
			t.Errorf("docs/operations.md's Tested servers does not name %s, whose tests start servers:\n%s", name, para)
		}
	}
}

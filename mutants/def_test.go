package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every definition parses, and applies to the tree it lives in: an edit
// elsewhere that changes a mutant's original text fails here, in the
// tests, rather than at the next mutant run.
func TestDefs_apply(t *testing.T) {
	ms, err := loadDefs("defs")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := m.changes(".."); err != nil {
			t.Errorf("mutant %s: %v (update its definition, defs/%s.txt)", m.name, err, m.name)
		}
	}
}

const def = `# a comment
breaks: tokens increase
note: anything
file: a.lua
test: . -run ^TestA$
test: sub -run ^TestB$/x -race FOO=1 server=redis-8.6.3
-- old --
local x = 1
-- new --
local x = 2
-- old b.go --
	one
	two

-- new --
`

func TestParseDef(t *testing.T) {
	m, err := parseDef("m", def)
	if err != nil {
		t.Fatalf("parseDef error = %v", err)
	}
	if m.breaks != "tokens increase" || m.pending != "" {
		t.Errorf("breaks, pending = %q, %q; want %q, empty", m.breaks, m.pending, "tokens increase")
	}
	want := []edit{
		{file: "a.lua", old: "local x = 1", new: "local x = 2"},
		{file: "b.go", old: "\tone\n\ttwo\n", new: ""},
	}
	if len(m.edits) != len(want) {
		t.Fatalf("edits = %q, want %q", m.edits, want)
	}
	for i := range want {
		if m.edits[i] != want[i] {
			t.Errorf("edit %d = %q, want %q", i, m.edits[i], want[i])
		}
	}
	if got, want := len(m.tests), 2; got != want {
		t.Fatalf("%d tests, want %d", got, want)
	}
	if got, want := m.tests[1].String(), "sub -run ^TestB$/x -race FOO=1 server=redis-8.6.3"; got != want {
		t.Errorf("test 2 = %q, want %q", got, want)
	}
}

func TestParseDef_invalid(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"no breaks", "file: a\ntest: . -run X\n-- old --\na\n-- new --\nb\n", "no breaks"},
		{"no test", "breaks: x\nfile: a\n-- old --\na\n-- new --\nb\n", "no test"},
		{"no -run", "breaks: x\nfile: a\ntest: . -race\n-- old --\na\n-- new --\nb\n", "no -run"},
		{"test outside the tree", "breaks: x\nfile: a\ntest: ../x -run X\n-- old --\na\n-- new --\nb\n", "inside the tree"},
		{"no edits", "breaks: x\nfile: a\ntest: . -run X\n", "no edits"},
		{"old without new", "breaks: x\nfile: a\ntest: . -run X\n-- old --\na\n", "without its -- new --"},
		{"new without old", "breaks: x\nfile: a\ntest: . -run X\n-- new --\na\n", "in pairs"},
		{"no file", "breaks: x\ntest: . -run X\n-- old --\na\n-- new --\nb\n", "no file"},
		{"same text", "breaks: x\nfile: a\ntest: . -run X\n-- old --\na\n-- new --\na\n", "the same"},
		{"empty old", "breaks: x\nfile: a\ntest: . -run X\n-- old --\n-- new --\na\n", "empty old"},
		{"unknown key", "brakes: x\n", "unknown key"},
		{"stray word", "breaks: x\nfile: a\ntest: . -run X y\n-- old --\na\n-- new --\nb\n", "neither a flag"},
	} {
		_, err := parseDef(tc.name, tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: parseDef error = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

func TestApply(t *testing.T) {
	root := t.TempDir()
	const orig = "a := 1\nb := 2\nb := 2\n"
	write := func() {
		if err := os.WriteFile(filepath.Join(root, "f.go"), []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		b, err := os.ReadFile(filepath.Join(root, "f.go"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write()
	m := &mutant{name: "m", edits: []edit{{file: "f.go", old: "a := 1", new: "a := 3"}}}
	undo, err := m.apply(root)
	if err != nil {
		t.Fatalf("apply error = %v", err)
	}
	if got, want := read(), "a := 3\nb := 2\nb := 2\n"; got != want {
		t.Errorf("mutated file = %q, want %q", got, want)
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != orig {
		t.Errorf("after undo, file = %q, want %q", got, orig)
	}

	for _, tc := range []struct {
		name  string
		edits []edit
		want  string
	}{
		{"absent", []edit{{file: "f.go", old: "c := 1", new: "c := 2"}}, "found 0 times"},
		{"twice", []edit{{file: "f.go", old: "b := 2", new: "b := 3"}}, "found 2 times"},
		{"second edit absent", []edit{{file: "f.go", old: "a := 1", new: "a := 3"}, {file: "f.go", old: "a := 1", new: "a := 4"}}, "found 0 times"},
		{"no such file", []edit{{file: "g.go", old: "a", new: "b"}}, "no such file"},
	} {
		m := &mutant{name: tc.name, edits: tc.edits}
		_, err := m.apply(root)
		if err == nil || !strings.Contains(err.Error(), "does not apply") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: apply error = %v, want does not apply: %s", tc.name, err, tc.want)
		}
		if got := read(); got != orig {
			t.Errorf("%s: after a failed apply, file = %q, want it unchanged", tc.name, got)
		}
	}
}

func TestParseEvents(t *testing.T) {
	out := strings.Join([]string{
		`{"Action":"run","Test":"TestA"}`,
		`{"Action":"output","Test":"TestA/sub","Output":"    a_test.go:9: got 1, want 2\n"}`,
		`{"Action":"fail","Test":"TestA/sub"}`,
		`{"Action":"fail","Test":"TestA"}`,
		`{"Action":"pass","Test":"TestB"}`,
		`{"Action":"fail","Test":"TestC"}`,
		`{"Action":"fail"}`,
	}, "\n")
	r := parseEvents([]byte(out))
	if !r.failed || r.build || r.timedOut {
		t.Errorf("failed, build, timedOut = %v, %v, %v; want true, false, false", r.failed, r.build, r.timedOut)
	}
	if got, want := strings.Join(r.tests, ","), "TestA/sub,TestC"; got != want {
		t.Errorf("failing tests = %s, want %s (subtests, not their parents)", got, want)
	}

	r = parseEvents([]byte(`{"ImportPath":"x","Action":"build-output","Output":"x.go:1: undefined: y\n"}
{"ImportPath":"x","Action":"build-fail"}
{"Action":"fail","Package":"x","FailedBuild":"x"}`))
	if !r.build || !r.failed {
		t.Errorf("build failure: build, failed = %v, %v; want true, true", r.build, r.failed)
	}

	r = parseEvents([]byte(`{"Action":"output","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Test":"TestSlow"}`))
	if !r.timedOut || r.killedBy() != "timeout in TestSlow" {
		t.Errorf("timeout: timedOut = %v, killedBy = %q; want true, %q", r.timedOut, r.killedBy(), "timeout in TestSlow")
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action      string
	Package     string
	ImportPath  string // build-output, build-fail
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// A record is one cell: the packages of one go test run on one server.
type record struct {
	Server   string
	Packages []pkgResult
	Exit     int     // go test's exit status
	Wall     float64 // seconds
}

// failed reports whether the cell failed, counting a go test that exited
// non-zero without a failing package (a go command error).
func (r record) failed() bool {
	if r.Exit != 0 {
		return true
	}
	for _, p := range r.Packages {
		if p.failed() {
			return true
		}
	}
	return false
}

type pkgResult struct {
	Path             string // relative to the repository: ".", "./cmd/fencelock"
	Pass, Fail, Skip int    // top-level tests, examples and fuzz targets
	Elapsed          float64
	Failed           []string // the innermost failing tests, in order
	PkgFailed        bool     // the package failed: a test, a build, TestMain, a panic or a timeout
}

func (p pkgResult) failed() bool { return p.PkgFailed || p.Fail > 0 }

// A summary reads go test -json, writes what go test prints without -v,
// and counts results per package.
type summary struct {
	w    io.Writer
	root string
	pkgs map[string]*pkgState
	seen []string // packages in order of first appearance
}

type pkgState struct {
	pkgResult
	running map[string]*testOutput // by top-level test
	failed  []string               // every failed test, subtests included
}

// testOutput holds a top-level test's output, subtests included, until
// it ends: it is printed only if it failed.
type testOutput struct {
	lines  []taggedLine
	failed map[string]bool
}

type taggedLine struct{ test, text string }

func newSummary(w io.Writer, root string) *summary {
	return &summary{w: w, root: root, pkgs: map[string]*pkgState{}}
}

func (s *summary) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(s.w, "%s\n", line) // not from test2json: pass it on
			continue
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(s.w, "testsummary: reading go test output:", err)
	}
}

func (s *summary) pkg(path string) *pkgState {
	p := s.pkgs[path]
	if p == nil {
		p = &pkgState{running: map[string]*testOutput{}}
		p.Path = s.display(path)
		s.pkgs[path] = p
		s.seen = append(s.seen, path)
	}
	return p
}

func (s *summary) display(path string) string {
	if path == s.root {
		return "."
	}
	if rest, ok := strings.CutPrefix(path, s.root+"/"); ok && s.root != "" {
		return "./" + rest
	}
	return path
}

func (s *summary) add(e event) {
	if e.Action == "build-output" {
		fmt.Fprint(s.w, e.Output)
		return
	}
	if e.Package == "" {
		return
	}
	p := s.pkg(e.Package)
	if e.Test == "" {
		s.addPackage(p, e)
		return
	}
	top, _, _ := strings.Cut(e.Test, "/")
	t := p.running[top]
	if t == nil {
		t = &testOutput{failed: map[string]bool{}}
		p.running[top] = t
	}
	switch e.Action {
	case "output":
		if !framing(e.Output) {
			t.lines = append(t.lines, taggedLine{e.Test, e.Output})
		}
	case "fail":
		t.failed[e.Test] = true
		p.failed = append(p.failed, e.Test)
	}
	if e.Test != top {
		return
	}
	switch e.Action {
	case "pass":
		p.Pass++
	case "skip":
		p.Skip++
	case "fail":
		p.Fail++
		s.printFailed(t)
	default:
		return
	}
	delete(p.running, top)
}

func (s *summary) addPackage(p *pkgState, e event) {
	switch e.Action {
	case "output":
		if e.Output != "PASS\n" && !framing(e.Output) {
			fmt.Fprint(s.w, e.Output)
		}
	case "pass", "skip":
		p.Elapsed = e.Elapsed
	case "fail":
		p.Elapsed = e.Elapsed
		p.PkgFailed = true
		if e.FailedBuild != "" {
			p.failed = append(p.failed, "(build failed)")
		}
		// Tests still running when the package failed (a panic or a
		// timeout) failed with it: print everything they wrote.
		for _, top := range sortedKeys(p.running) {
			t := p.running[top]
			for _, l := range t.lines {
				fmt.Fprint(s.w, l.text)
			}
			p.failed = append(p.failed, top+" (did not finish)")
			p.Fail++
		}
		clear(p.running)
	}
}

func (s *summary) printFailed(t *testOutput) {
	for _, l := range t.lines {
		if t.failed[l.test] {
			fmt.Fprint(s.w, l.text)
		}
	}
}

// framing reports whether a line is one that go test -v adds and go test
// without -v does not print.
func framing(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// record returns the counts so far, with the innermost failing tests of
// each package: a failing subtest fails its parents too, and only the
// subtest says where.
func (s *summary) record(server string) record {
	r := record{Server: server}
	for _, path := range s.seen {
		p := s.pkgs[path]
		res := p.pkgResult
		res.Failed = nil
		for _, name := range p.failed {
			if !slices.ContainsFunc(p.failed, func(o string) bool { return strings.HasPrefix(o, name+"/") }) {
				res.Failed = append(res.Failed, name)
			}
		}
		r.Packages = append(r.Packages, res)
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

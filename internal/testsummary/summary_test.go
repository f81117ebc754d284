package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// testdata/gotest.json is real go test -json output of four small
// packages: a (pass, skip, failing subtests, an example), b (a panic),
// c (a build failure) and d (a test that hangs past -timeout 1s).
func readSample(t *testing.T) (record, string) {
	t.Helper()
	f, err := os.Open("testdata/gotest.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	s := newSummary(&out, "example.com/m")
	s.read(f)
	return s.record("redis-8.6.3"), out.String()
}

func TestSummary_counts(t *testing.T) {
	rec, _ := readSample(t)
	want := []pkgResult{
		{Path: "./a", Pass: 2, Fail: 2, Skip: 1, Failed: []string{"TestSub/bad", "TestParallel/y"}, PkgFailed: true},
		{Path: "./b", Pass: 1, Fail: 1, Failed: []string{"TestPanics"}, PkgFailed: true},
		{Path: "./c", Failed: []string{"(build failed)"}, PkgFailed: true},
		{Path: "./d", Pass: 1, Fail: 1, Failed: []string{"TestHangs (did not finish)"}, PkgFailed: true},
	}
	if len(rec.Packages) != len(want) {
		t.Fatalf("got %d packages %+v, want %d", len(rec.Packages), rec.Packages, len(want))
	}
	for i, got := range rec.Packages {
		got.Elapsed = 0
		w := want[i]
		if got.Path != w.Path || got.Pass != w.Pass || got.Fail != w.Fail || got.Skip != w.Skip ||
			got.PkgFailed != w.PkgFailed || !slices.Equal(got.Failed, w.Failed) {
			t.Errorf("package %d: got %+v, want %+v", i, got, w)
		}
	}
	if rec.Server != "redis-8.6.3" {
		t.Errorf("server: got %q, want %q", rec.Server, "redis-8.6.3")
	}
}

func TestSummary_printsFailuresOnly(t *testing.T) {
	_, out := readSample(t)
	for _, want := range []string{
		"got 1, want 2",                         // failing subtest's message
		"--- FAIL: TestSub/bad",                 // and its result line
		"y failed",                              // failing parallel subtest
		"panic: assignment to entry in nil map", // panic in b
		"undefined: undefined",                  // c's compiler error
		"FAIL\texample.com/m/c [build failed]",  // c's package line
		"panic: test timed out after 1s",        // d's timeout
		"waiting forever",                       // the hanging test's log
		"FAIL\texample.com/m/a",                 // package result lines
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q; got:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{
		"quiet when passing",   // a passing test's log
		"sub ok log",           // a passing subtest's log, under a failing parent
		"--- PASS: TestSub/ok", // a passing subtest's result
		"=== RUN",
		"=== PAUSE",
		"=== CONT",
	} {
		if strings.Contains(out, unwanted) {
			t.Errorf("output has %q; got:\n%s", unwanted, out)
		}
	}
}

func TestPrintTable(t *testing.T) {
	failing, _ := readSample(t)
	passing := record{Server: "redis-7.0.15", Wall: 61, Packages: []pkgResult{
		{Path: ".", Pass: 3, Skip: 1, Elapsed: 60.2},
		{Path: "./fence/fencetest"}, // no tests: left out
	}}
	var out bytes.Buffer
	if !printTable(&out, []record{passing}) {
		t.Errorf("printTable(passing) = false, want true; output:\n%s", out.String())
	}
	for _, want := range []string{"redis-7.0.15", "PASS: every cell passed", "wall 1m1s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("passing table lacks %q; got:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "fencetest") {
		t.Errorf("passing table lists a package without tests; got:\n%s", out.String())
	}

	out.Reset()
	if printTable(&out, []record{passing, failing}) {
		t.Errorf("printTable(passing, failing) = true, want false; output:\n%s", out.String())
	}
	for _, want := range []string{"FAIL: 5 failing", "TestSub/bad", "TestParallel/y", "TestPanics", "(build failed)", "TestHangs (did not finish)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("failing table lacks %q; got:\n%s", want, out.String())
		}
	}
}

func TestPrintTable_exitWithoutFailingPackage(t *testing.T) {
	// go test exits 1 with no test output when, say, a package pattern
	// matches nothing.
	rec := record{Server: "valkey-9.1.2", Exit: 1}
	var out bytes.Buffer
	if printTable(&out, []record{rec}) {
		t.Errorf("printTable = true, want false; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "go test exited 1") {
		t.Errorf("table lacks the exit status; got:\n%s", out.String())
	}
}

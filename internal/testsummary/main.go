// Command testsummary runs go test -json for one cell of the server matrix
// that scripts/test-matrix drives, prints what go test would print without
// -v (package results, and the output of failing tests only), and prints
// one table of every cell at the end.
//
//	testsummary run -server NAME -root MODULE -out FILE [-label LABEL] -- go test -json ARGS...
//	testsummary table FILE...
//
// run records the cell's counts in FILE and exits 0 unless the command
// could not be started; table prints server × package → pass, fail and
// skip counts of top-level tests, the failing tests under it, each
// server's wall time, and exits 1 if any cell failed.
// -label names a cell run on another transport (FENCELOCK_TRANSPORT): its
// packages are rows of their own, "./tests [rueidis]".
//
// It uses only the standard library, so that go run builds it on a
// fresh machine without downloads.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		os.Exit(runCmd(os.Args[2:]))
	case "table":
		os.Exit(tableCmd(os.Args[2:]))
	}
	usage()
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testsummary run -server NAME -root MODULE -out FILE [-label LABEL] -- go test -json ARGS...\n       testsummary table FILE...")
	os.Exit(2)
}

func runCmd(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	server := fs.String("server", "-", "the server the packages ran on (- for none)")
	root := fs.String("root", "", "the repository's root module path, trimmed from package paths")
	out := fs.String("out", "", "write the cell's record to this file")
	label := fs.String("label", "", "appended to the cell's package paths in brackets: the transport the packages ran on")
	fs.Parse(args)
	if *out == "" || fs.NArg() == 0 {
		usage()
	}

	s := newSummary(os.Stdout, *root)
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stderr = nil, os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	s.read(stdout)
	rec := s.record(*server)
	if *label != "" {
		for i := range rec.Packages {
			rec.Packages[i].Path += " [" + *label + "]"
		}
	}
	if err := cmd.Wait(); err != nil {
		rec.Exit = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			rec.Exit = ee.ExitCode()
		}
	}
	rec.Wall = time.Since(start).Seconds()
	b, err := json.Marshal(rec)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	return 0
}

func tableCmd(files []string) int {
	var recs []record
	for _, f := range files {
		b, err := os.ReadFile(f)
		var r record
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			return 1
		}
		recs = append(recs, r)
	}
	if !printTable(os.Stdout, recs) {
		return 1
	}
	return 0
}

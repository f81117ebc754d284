package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A result is what one go test run said.
type result struct {
	failed   bool
	tests    []string // the failing tests, subtests rather than parents
	build    bool     // the package did not build (or vet it)
	timedOut bool     // go test's -timeout, or the hard stop after it
	note     string   // a failure no test is named for (e.g. TestMain's)
	output   string
	elapsed  time.Duration
}

// killedBy names what failed: the failing tests, or why none is named.
func (r result) killedBy() string {
	var s string
	switch {
	case len(r.tests) > 3:
		s = strings.Join(r.tests[:3], ", ") + fmt.Sprintf(" +%d more", len(r.tests)-3)
	case len(r.tests) > 0:
		s = strings.Join(r.tests, ", ")
	case r.note != "":
		s = r.note
	default:
		s = "the package (no test named; see -v)"
	}
	if r.timedOut {
		s = "timeout in " + s
	}
	return s
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

// goTest runs c in the tree at root: go test -json -count=1 with c's
// flags in c's directory, in a process group of its own that is killed
// when the run ends, so that servers a test left behind (a test binary
// stopped by -timeout runs no cleanups) die with it.
func (o *opts) goTest(ctx context.Context, root string, c testCmd) (result, error) {
	args := append([]string{"test", "-json", "-count=1", "-timeout", o.timeout.String()}, c.args...)
	args = append(args, ".")
	// A test binary stopped by -timeout prints its stacks first; a hang
	// that -timeout cannot stop (a build, a stuck cleanup) is cut here.
	ctx, cancel := context.WithTimeout(ctx, o.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, filepath.FromSlash(c.dir))
	// The copy's own workspace, so that its nested modules build against
	// the mutated library, whatever GOWORK the caller has set.
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	cmd.Env = append(cmd.Env, c.env...)
	if c.server != "" {
		bin, err := o.servers.bin(ctx, c.server)
		if err != nil {
			return result{}, err
		}
		cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	err := cmd.Start()
	if err != nil {
		return result{}, err
	}
	err = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the tests left running
	r := parseEvents(out.Bytes())
	r.elapsed = time.Since(start)
	r.output += stderr.String()
	if ctx.Err() != nil {
		r.failed, r.timedOut = true, true
		return r, nil
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		if r.failed {
			return r, fmt.Errorf("go test %s: exit status 0 with failing tests %v", c, r.tests)
		}
	case errors.As(err, &exit):
		r.failed = true
		if strings.Contains(stderr.String(), "setup failed") || strings.Contains(stderr.String(), "no Go files") {
			r.build = true
		}
	default:
		return r, err
	}
	return r, nil
}

// parseEvents reads go test -json output.
func parseEvents(b []byte) result {
	var r result
	var failed []string
	var text strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			text.WriteString(sc.Text() + "\n") // go's own messages
			continue
		}
		text.WriteString(ev.Output)
		switch {
		case ev.Action == "build-fail", ev.FailedBuild != "":
			r.build, r.failed = true, true
		case ev.Action == "fail" && ev.Test != "":
			failed = append(failed, ev.Test)
			r.failed = true
		case ev.Action == "fail":
			r.failed = true
		}
		switch out := ev.Output; {
		case strings.HasPrefix(out, "panic: test timed out"):
			r.timedOut = true
		case strings.Contains(out, "[build failed]"), strings.Contains(out, "[setup failed]"):
			r.build = true
		case ev.Test == "" && r.note == "" && strings.Contains(out, "goroutines left behind"):
			r.note = "TestMain (goroutines left behind)"
		}
	}
	r.output = text.String()
	// Name subtests rather than the parents they fail.
	for _, t := range failed {
		if !slices.ContainsFunc(failed, func(u string) bool { return strings.HasPrefix(u, t+"/") }) {
			r.tests = append(r.tests, t)
		}
	}
	return r
}

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// proc is fencelock run as a real process (this test binary in main
// mode), with its whole output kept.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan struct{}
}

// startProc starts fencelock with args, env added to the environment,
// and COMMAND (this test binary) in child mode.
func startProc(t *testing.T, mode string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), mainEnv+"=1", childEnv+"="+mode), env...)
	return startCmd(t, cmd)
}

// startCmd starts cmd, which runs fencelock (this test binary in main
// mode, maybe through a shell), and owns its Wait.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stdout: newOutput(), stderr: newOutput(), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process to exit, bounded, and returns its status.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("fencelock %q did not exit within 30s\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], p.stdout, p.stderr)
		return -1
	}
}

// runProc runs fencelock to the end and returns its status, stdout and
// stderr.
func runProc(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	p := startProc(t, "", env, args...)
	code := p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// ownerOf returns the owner secret that holds the lock key now.
func ownerOf(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(t.Context(), key).Result()
	if err != nil || v == "" {
		t.Fatalf("GET %s = %q, %v; want the holder's secret", key, v, err)
	}
	return v
}

// The owner secret never leaves fencelock but where acquire prints it on
// purpose: over a life cycle of run (with its metrics page) through a
// loss and a frozen Redis, acquire, status, renew and release (after the
// loss too), elect, leader and doctor, no secret appears on any command's
// stdout or stderr, in COMMAND's environment (which the child prints
// whole) or on the metrics page. A FENCELOCK_SECRET from an earlier
// "eval $(fencelock acquire)" in fencelock's environment is not passed on
// either.
func TestSecret_neverLeaves(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ctx := t.Context()
	url := redisURL(s)
	var (
		secrets []string
		outputs = map[string]string{} // what was printed, by where
	)
	keep := func(where, out string) { outputs[where] += out }

	// A lease from acquire, whose secret is in the environment of every
	// later command, as after eval "$(fencelock acquire --export ...)".
	code, out, errOut := runProc(t, nil, "acquire", "--redis", url, "--ttl", "30s", "--export", "shell-held")
	if code != 0 {
		t.Fatalf("acquire exit = %d\n%s", code, errOut)
	}
	vars, err := parseShellAssignments(out)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, vars["FENCELOCK_SECRET"])
	keep("acquire stderr", errOut) // its stdout is the lease, on purpose
	var leaseEnv []string
	for k, v := range vars {
		leaseEnv = append(leaseEnv, k+"="+v)
	}

	// run, until the lock is taken over: COMMAND ignores SIGTERM, so that
	// the metrics page can be read after the loss, until SIGKILL.
	maddr := metricsAddr(t)
	run := startProc(t, "environ", leaseEnv, "run", "--redis", url, "--ttl", "10s", "--grace", "400ms", "--metrics-addr", maddr, "lost-job", "--", os.Args[0])
	run.stdout.waitFor(t, "ready")
	secrets = append(secrets, ownerOf(t, rdb, "fencelock:{lost-job}"))
	_, page := scrape(t, maddr)
	keep("metrics while held", page)
	_, out, errOut = runProc(t, leaseEnv, "status", "--redis", url, "lost-job")
	keep("status stdout", out)
	keep("status stderr", errOut)
	code, out, errOut = runProc(t, nil, "acquire", "--redis", url, "-n", "lost-job")
	if code != exitNotAcquired {
		t.Errorf("acquire -n of a held lock: exit = %d, want %d", code, exitNotAcquired)
	}
	keep("acquire -n stdout", out)
	keep("acquire -n stderr", errOut)
	if err := rdb.Set(ctx, "fencelock:{lost-job}", "taken-over", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	run.stderr.waitFor(t, "sending SIGTERM")
	waitSample(t, maddr, `fencelock_leases_lost_total{lock="lost-job"}`, 1)
	_, page = scrape(t, maddr)
	keep("metrics after the loss", page)
	if code := run.wait(t); code != exitLeaseLost {
		t.Errorf("run after the takeover: exit = %d, want %d", code, exitLeaseLost)
	}
	keep("run stdout (COMMAND's environment)", run.stdout.String())
	keep("run stderr", run.stderr.String())

	// run against a Redis that freezes: renewals fail, COMMAND is killed
	// by the deadline, the release fails.
	frozen := startProc(t, "environ", leaseEnv, "run", "--redis", url, "--ttl", "10s", "--grace", "300ms", "--timeout", "200ms", "frozen-job", "--", os.Args[0])
	frozen.stdout.waitFor(t, "ready")
	secrets = append(secrets, ownerOf(t, rdb, "fencelock:{frozen-job}"))
	s.Pause(t)
	code = frozen.wait(t)
	s.Resume(t)
	if code != exitLeaseLost {
		t.Errorf("run with Redis frozen: exit = %d, want %d", code, exitLeaseLost)
	}
	keep("frozen run stdout (COMMAND's environment)", frozen.stdout.String())
	keep("frozen run stderr", frozen.stderr.String())

	// The shell's lease: renewed, released, then renewed and released
	// again once it is gone (124).
	for _, args := range [][]string{{"renew"}, {"release"}, {"renew"}, {"release"}} {
		code, out, errOut := runProc(t, leaseEnv, append(args, "--redis", url)...)
		keep(args[0]+" stdout", out)
		keep(args[0]+" stderr", errOut)
		if code != 0 && code != exitLeaseLost {
			t.Errorf("%s: exit = %d, want 0 or %d", args[0], code, exitLeaseLost)
		}
	}

	// An election: its COMMAND's environment, and leader's output.
	el := startProc(t, "environ", leaseEnv, "elect", "--redis", url, "--ttl", "10s", "--grace", "300ms", "elected", "--", os.Args[0])
	el.stdout.waitFor(t, "ready")
	secrets = append(secrets, ownerOf(t, rdb, "fencelock:{elected}"))
	for _, args := range [][]string{{"leader", "elected"}, {"leader", "--json", "elected"}} {
		_, out, errOut := runProc(t, leaseEnv, append(args, "--redis", url)...)
		keep("leader stdout", out)
		keep("leader stderr", errOut)
	}
	rdb.Del(ctx, "fencelock:{elected}") // lost: COMMAND is killed after --grace
	if code := el.wait(t); code != exitLeaseLost {
		t.Errorf("elect after the loss: exit = %d, want %d", code, exitLeaseLost)
	}
	keep("elect stdout (COMMAND's environment)", el.stdout.String())
	keep("elect stderr", el.stderr.String())

	_, out, errOut = runProc(t, leaseEnv, "doctor", "--redis", url)
	keep("doctor stdout", out)
	keep("doctor stderr", errOut)

	if len(secrets) != 4 {
		t.Fatalf("%d secrets collected, want 4", len(secrets))
	}
	for where, out := range outputs {
		for _, secret := range secrets {
			if strings.Contains(out, secret) {
				t.Errorf("%s holds an owner secret:\n%s", where, out)
			}
		}
		if strings.Contains(where, "environment") && strings.Contains(out, "FENCELOCK_SECRET=") {
			t.Errorf("%s: COMMAND got FENCELOCK_SECRET", where)
		}
	}
	// The outputs said what happened, so the grep looked at something.
	for where, want := range map[string]string{
		"run stderr":                         "lease lost",
		"frozen run stderr":                  "cannot be renewed in time",
		"run stdout (COMMAND's environment)": "FENCELOCK_LEASE=",
		"metrics after the loss":             "fencelock_leases_lost_total",
		"renew stderr":                       "lease lost",
	} {
		if !strings.Contains(outputs[where], want) {
			t.Errorf("%s lacks %q:\n%s", where, want, outputs[where])
		}
	}
}

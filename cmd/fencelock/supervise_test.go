package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeLease is a leaseClock with a fixed deadline.
type fakeLease struct {
	ctx      context.Context
	deadline time.Time
}

func (l fakeLease) Context() context.Context { return l.ctx }
func (l fakeLease) Deadline() time.Time      { return l.deadline }

// When the lease is lost with less than --grace left, SIGKILL goes out
// killLead before the deadline, not grace after SIGTERM: the deadline
// passes before Redis could let another holder in. The guard is played
// by the test, which reads the control pipe: "signal 15", then end of
// file (the kill) in --foreground mode.
func TestSupervisor_killBeforeDeadline(t *testing.T) {
	t.Parallel()
	controlR, controlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer controlR.Close()
	events := make(chan guardEvent, 8)
	exited := make(chan error, 1)
	g := &guard{control: controlW, events: events, exited: exited}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("lease lost")) // lost at once
	deadline := time.Now().Add(400 * time.Millisecond)
	var mu sync.Mutex
	var said strings.Builder
	s := &supervisor{cmd: "run", g: g, name: "n", lease: fakeLease{ctx, deadline}, grace: 5 * time.Second, killLead: 50 * time.Millisecond,
		say: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&said, format, args...)
		},
		renewErr: func() error { return nil }}
	done := make(chan result, 1)
	go func() { done <- s.run() }()

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(controlR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	timeout := time.After(10 * time.Second)
	for eof := false; !eof; {
		select {
		case l, ok := <-lines:
			if !ok {
				eof = true
				break
			}
			if !strings.HasPrefix(l, "deadline ") {
				got = append(got, l)
			}
		case <-timeout:
			t.Fatalf("no kill within 10s (orders %q)", got)
		}
	}
	killed := time.Now()
	if killed.After(deadline) {
		t.Errorf("SIGKILL %v after the lease's deadline, want before it (--grace 5s reaches past it)", killed.Sub(deadline))
	}
	if want := []string{"signal 15"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("orders before the kill = %q, want %q", got, want)
	}
	events <- guardEvent{kind: "exited", status: syscall.WaitStatus(syscall.SIGKILL)}
	close(events)
	exited <- nil
	select {
	case res := <-done:
		if !res.killed || res.status != "signal: killed" {
			t.Errorf("result %+v, want killed with SIGKILL", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor did not return within 10s")
	}
	mu.Lock()
	defer mu.Unlock()
	if msg := said.String(); !strings.Contains(msg, "SIGKILL at the lease's deadline in ") {
		t.Errorf("said %q, want SIGKILL at the lease's deadline", msg)
	}
}

// How COMMAND ended after run terminated it is worded from its wait
// status, not from whether SIGKILL went out: it may have ended of SIGTERM
// just before.
func TestStopHow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  result
		want string
	}{
		{result{status: "signal: terminated", killed: true}, "ended before SIGKILL reached it"},
		{result{status: "signal: killed", killed: true}, "was killed with SIGKILL"},
		{result{status: "exit status 3"}, "exited after SIGTERM"},
		{result{status: "signal: terminated"}, "exited after SIGTERM"},
	} {
		if got := stopHow(tc.res); got != tc.want {
			t.Errorf("stopHow(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}

// The guard is started armed with the lease's deadline less the kill
// lead, not the deadline itself: a fencelock stopped before its first
// word to the guard (here the test, which never runs the supervisor)
// still has COMMAND killed before the lease's deadline, which is when the
// library lets the lease go, not at it.
func TestSupervisor_firstDeadline(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{true, false} {
		t.Run(fmt.Sprintf("group=%t", group), func(t *testing.T) {
			t.Parallel()
			// A kill lead of 5s: the guard's kill lands before the deadline
			// even on a machine that starves it for seconds, and without
			// the lead it lands after.
			deadline := time.Now().Add(10 * time.Second)
			s := &supervisor{cmd: "run", name: "n", lease: fakeLease{context.Background(), deadline}, grace: time.Second, killLead: 5 * time.Second}
			env := append(os.Environ(), childEnv+"=ignore-term")
			if err := s.start(os.Args[0], []string{os.Args[0]}, env, &exec.Cmd{Stdout: io.Discard}, group); err != nil {
				t.Fatal(err)
			}
			defer s.g.control.Close()
			timeout := time.After(30 * time.Second)
			for {
				select {
				case ev, ok := <-s.g.events:
					if !ok {
						t.Fatalf("guard exited (%v) without reporting how COMMAND ended", <-s.g.exited)
					}
					switch ev.kind {
					case "started":
						t.Cleanup(func() { syscall.Kill(ev.pid, syscall.SIGKILL) })
					case "exited":
						if late := time.Since(deadline); late >= 0 {
							t.Errorf("COMMAND ended %v after the lease's deadline, want killed the kill lead (5s) before it", late)
						}
						if !ev.status.Signaled() || ev.status.Signal() != syscall.SIGKILL {
							t.Errorf("COMMAND ended: %s, want killed by SIGKILL", describe(ev.status))
						}
						return
					case "failed":
						t.Fatalf("COMMAND failed to start: %d %s", ev.code, ev.text)
					}
				case <-timeout:
					t.Fatal("COMMAND still running 30s after the lease's deadline, want it killed before")
				}
			}
		})
	}
}

// A renewal that reaches the guard after the deadline it was armed with
// comes too late: the guard has killed COMMAND at the old deadline, and
// run must report the lease's deadline passing (exit 124), not COMMAND
// killed by a signal (137) because fencelock's own idea of the deadline
// had moved on. A fencelock starved on a loaded machine renews the lease
// in time for Redis but tells its guard too late.
func TestSupervisor_guardExpiredBeforeRenewalReachedIt(t *testing.T) {
	t.Parallel()
	first := time.Now().Add(time.Second)
	s := &supervisor{cmd: "run", name: "n", lease: fakeLease{context.Background(), first}, grace: time.Second, killLead: 500 * time.Millisecond,
		say: func(string, ...any) {}, renewErr: func() error { return nil }}
	env := append(os.Environ(), childEnv+"=ignore-term")
	if err := s.start(os.Args[0], []string{os.Args[0]}, env, &exec.Cmd{Stdout: io.Discard}, true); err != nil {
		t.Fatal(err)
	}
	// fencelock is starved until its guard has acted on the first
	// deadline and exited.
	if !waitProcGone(s.g.proc.Process.Pid, 30*time.Second) {
		t.Fatal("guard still running 30s after the first deadline")
	}
	// Then it runs: the lease was renewed meanwhile.
	s.lease = fakeLease{context.Background(), time.Now().Add(time.Hour)}
	res := s.run()
	if !res.killed || res.stopped == "" || res.err != nil {
		t.Errorf("run = killed %t, stopped %q, err %v; want COMMAND reported killed at the lease's deadline by its guard", res.killed, res.stopped, res.err)
	}
}

// waitProcGone waits until pid has exited (a zombie, or reaped), for at
// most d.
func waitProcGone(pid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

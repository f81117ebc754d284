package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
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

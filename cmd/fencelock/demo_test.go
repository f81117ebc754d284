package main

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// checkDemo checks that the unfenced story accepted the stale write and
// the fenced one rejected it, in that order.
func checkDemo(t *testing.T, out string) {
	t.Helper()
	unfenced, fenced, ok := strings.Cut(out, "2. With fencing")
	if !ok {
		t.Fatalf("demo output has no fenced story:\n%s", out)
	}
	for _, c := range []struct{ section, want string }{
		{unfenced, `writes "report by A`},
		{unfenced, "-> ACCEPTED"},
		{unfenced, "the stale write was ACCEPTED"},
		{fenced, "-> REJECTED: token"},
		{fenced, "the stale write was REJECTED"},
		{fenced, `The report now says "report by B`},
	} {
		if !strings.Contains(c.section, c.want) {
			t.Errorf("demo story lacks %q:\n%s", c.want, c.section)
		}
	}
	// B writes before A wakes, in both stories.
	for _, section := range []string{unfenced, fenced} {
		b, a := strings.Index(section, "B  writes"), strings.Index(section, "A  wakes")
		if b < 0 || a < 0 || b > a {
			t.Errorf("demo timeline out of order (B writes at %d, A wakes at %d):\n%s", b, a, section)
		}
	}
}

func TestDemo_redis(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	h := newHarness(t)
	if code := h.run("demo", "--redis", redisURL(s)); code != 0 {
		t.Fatalf("demo exit = %d, want 0\n%s", code, h.stderr)
	}
	checkDemo(t, h.stdout.String())
	// It cleans up after itself on a server the user named.
	if keys := s.Client(t).Keys(t.Context(), "*").Val(); len(keys) != 0 {
		t.Errorf("keys left after demo: %q", keys)
	}
}

var startedRE = regexp.MustCompile(`Started redis-server \S+ on (127\.0\.0\.1:\d+)`)

func TestDemo_ownServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	h := newHarness(t)
	if code := h.run("demo"); code != 0 {
		t.Fatalf("demo exit = %d, want 0\n%s", code, h.stderr)
	}
	out := h.stdout.String()
	checkDemo(t, out)
	m := startedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("demo did not say where it started redis-server:\n%s", out)
	}
	if c, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		c.Close()
		t.Errorf("demo's redis-server at %s still accepts connections after the demo", m[1])
	}
}

// A Ctrl-C (ctx cancelled) during the story stops the server too.
func TestDemo_interrupted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- h.cli().main(ctx, []string{"demo", "--ttl", "5s"}) }()
	h.stdout.waitFor(t, "B  waits") // A is paused for 5s now
	cancel()
	if code := h.exit(done); code == 0 {
		t.Errorf("interrupted demo exit = 0, want non-zero")
	}
	m := startedRE.FindStringSubmatch(h.stdout.String())
	if m == nil {
		t.Fatalf("demo did not say where it started redis-server:\n%s", h.stdout)
	}
	if c, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		c.Close()
		t.Errorf("demo's redis-server at %s still accepts connections after an interrupt", m[1])
	}
}

func TestDemo_usage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"demo", "extra"},
		{"demo", "--ttl", "1ms"},
		{"demo", "--ttl", "1h"},
		{"demo", "--redis", "http://x"},
	} {
		h := newHarness(t)
		if got := h.run(args...); got != exitUsage {
			t.Errorf("fencelock %q: exit = %d, want %d", args, got, exitUsage)
		}
	}
}

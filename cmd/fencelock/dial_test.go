package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// Connecting is bounded by --timeout: a Sentinel (or a node) that does
// not answer fails within it, where go-redis alone took 36 to 72s.
func TestConnect_timeout(t *testing.T) {
	t.Parallel()
	hole, _ := blackhole(t)
	closed := redistest.RefusedAddr(t)
	for _, url := range []string{
		"redis+sentinel://" + hole + "/mymaster",
		"redis+sentinel://" + closed + "/mymaster",
		"redis+sentinel://" + hole + "," + closed + "/mymaster",
		"redis://" + hole,
		"redis+cluster://" + hole,
	} {
		for _, args := range [][]string{{"run", "x", "--", "true"}, {"status", "x"}, {"doctor"}} {
			h := newHarness(t)
			// Well within go-redis's own 36s: if --timeout were not
			// honoured, this context would end first, and fencelock
			// would report an interruption (75), not a failure (125).
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			code := h.cli().main(ctx, append([]string{args[0], "--redis", url, "--timeout", "1s"}, args[1:]...))
			cancel()
			if code != exitInternal {
				t.Errorf("fencelock %s --redis %s: exit = %d, want %d\n%s", args[0], url, code, exitInternal, h.stderr)
			}
		}
	}
}

// A refused connection is reported at once and as what it is, not after
// go-redis's retries (1.7s), nor, with a shorter --timeout, as a server
// that did not answer.
func TestConnect_refusedAtOnce(t *testing.T) {
	t.Parallel()
	for _, url := range []string{closedURL(t), "unix://" + t.TempDir() + "/no.sock"} {
		for _, timeout := range []string{"1s", "10s"} {
			h := newHarness(t)
			start := time.Now()
			code := h.run("status", "--redis", url, "--timeout", timeout, "x")
			took := time.Since(start)
			if code != exitInternal {
				t.Errorf("status --redis %s --timeout %s: exit = %d, want %d", url, timeout, code, exitInternal)
			}
			msg := oneLine(t, h.stderr.String(), "fencelock status: ")
			if strings.Contains(msg, "no answer") || !strings.Contains(msg, "connection refused") && !strings.Contains(msg, "no such file") {
				t.Errorf("status --redis %s --timeout %s: stderr %q, want the refused dial", url, timeout, msg)
			}
			// Generous for a loaded machine: the refusal itself takes
			// microseconds, go-redis's retries 1.7s.
			if took > 800*time.Millisecond {
				t.Errorf("status --redis %s --timeout %s: reported after %v, want within 800ms", url, timeout, took)
			}
		}
	}
}

// Through Sentinels a refused dial is no reason to give up before
// --timeout: the master they name may be failing over, and the next one
// may answer. Here the one Sentinel names a master that refuses (nothing
// ever listens at its address): status waits out --timeout and reports
// the refused dial as the last one, where a single node's refusal is
// reported at once.
func TestConnect_sentinelRefusedMaster(t *testing.T) {
	t.Parallel()
	master := redistest.RefusedAddr(t)
	host, port, _ := strings.Cut(master, ":")
	sen := redistest.Start(t, &redistest.Options{Sentinel: true, Config: []string{
		"sentinel monitor " + redistest.MasterName + " " + host + " " + port + " 1",
	}})
	h := newHarness(t)
	url := "redis+sentinel://" + sen.Addr() + "/" + redistest.MasterName
	if code := h.run("status", "--redis", url, "--timeout", "1s", "x"); code != exitInternal {
		t.Errorf("status through a Sentinel naming a refusing master: exit = %d, want %d", code, exitInternal)
	}
	msg := oneLine(t, h.stderr.String(), "fencelock status: ")
	for _, want := range []string{"no answer within --timeout 1s", "the last dial failed: dial tcp " + master + ": connect: connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q, want it to say %q", msg, want)
		}
	}
}

// A server that refuses the password (or wants one) was reached: the
// message says what it refused and where the password comes from, not
// that Redis cannot be reached, and never shows the password.
func TestConnect_authFailure(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	addr := s.Addr()
	// The helpers connect as the default user, unrestricted: its password
	// is set once the server runs, and taken away before it stops, on a
	// connection authenticated before.
	rdb := s.Client(t)
	for _, rule := range [][]any{{"default", "on", "resetpass", ">s3cret-pw"}, {"app", "on", ">app-pw", "~*", "&*", "+@all"}} {
		if err := rdb.Do(t.Context(), append([]any{"ACL", "SETUSER"}, rule...)...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %v: %v", rule, err)
		}
	}
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "SETUSER", "default", "nopass") })
	for _, tc := range []struct {
		env  map[string]string
		url  string
		want string
	}{
		{url: "redis://" + addr,
			want: "fencelock status: no password for Redis at redis://" + addr + ": NOAUTH Authentication required. (give it in REDIS_PASSWORD, and the ACL user in REDIS_USERNAME, or in the URL: redis://USER:PASSWORD@HOST:PORT)"},
		{url: "redis://:wrong-pw@" + addr,
			want: "fencelock status: wrong user or password for Redis at redis://:xxxxx@" + addr + ": WRONGPASS invalid username-password pair or user is disabled. (give them in REDIS_USERNAME and REDIS_PASSWORD, or in the URL: redis://USER:PASSWORD@HOST:PORT)"},
		{env: map[string]string{"REDIS_USERNAME": "nobody", "REDIS_PASSWORD": "wrong-pw"}, url: "redis://" + addr,
			want: "fencelock status: wrong user or password for Redis at redis://" + addr + ": WRONGPASS invalid username-password pair or user is disabled. (give them in REDIS_USERNAME and REDIS_PASSWORD, or in the URL: redis://USER:PASSWORD@HOST:PORT)"},
	} {
		h := newHarness(t)
		for k, v := range tc.env {
			h.env[k] = v
		}
		if code := h.run("status", "--redis", tc.url, "x"); code != exitInternal {
			t.Errorf("status --redis %s (env %v): exit = %d, want %d", tc.url, tc.env, code, exitInternal)
		}
		if got := strings.TrimSuffix(h.stderr.String(), "\n"); got != tc.want {
			t.Errorf("status --redis %s (env %v):\n got %s\nwant %s", tc.url, tc.env, got, tc.want)
		}
	}
	for _, env := range []map[string]string{{"REDIS_PASSWORD": "s3cret-pw"}, {"REDIS_USERNAME": "app", "REDIS_PASSWORD": "app-pw"}} {
		h := newHarness(t)
		for k, v := range env {
			h.env[k] = v
		}
		if code := h.run("status", "--redis", "redis://"+addr, "x"); code != 0 {
			t.Errorf("status with %v: exit = %d, want 0", env, code)
		}
	}
}

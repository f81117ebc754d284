package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// A second release of a released lease says so and succeeds, as the
// library's Release is idempotent: nothing is held that could block
// anyone. A lease whose lock another lease holds now is lost: 124,
// naming the holder.
func TestRelease_twice(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	vars := acquireVars(t, s, "twice")
	for i, want := range []string{"", `lock "twice" is not held: already released (or the lease expired)`} {
		h := newHarness(t)
		h.env = vars
		if code := h.run("release", "--redis", redisURL(s)); code != 0 {
			t.Errorf("release %d: exit = %d, want 0", i+1, code)
		}
		if want == "" {
			if h.stderr.String() != "" {
				t.Errorf("release 1: stderr %q, want nothing", h.stderr)
			}
			continue
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock release: "); !strings.Contains(msg, want) || strings.Contains(msg, "lost") {
			t.Errorf("release %d: stderr %q, want %q", i+1, msg, want)
		}
	}

	vars = acquireVars(t, s, "--ttl", "1s", "taken-over")
	rdb.Del(t.Context(), "fencelock:{taken-over}") // as if it expired
	other, err := fencelock.New(rdb, &fencelock.Options{TTL: time.Minute}).TryAcquire(t.Context(), "taken-over")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(t.Context())
	h := newHarness(t)
	h.env = vars
	if code := h.run("release", "--redis", redisURL(s)); code != exitLeaseLost {
		t.Errorf("release of a lock another lease holds: exit = %d, want %d", code, exitLeaseLost)
	}
	if msg := oneLine(t, h.stderr.String(), "fencelock release: "); !strings.Contains(msg, "lease lost") || !strings.Contains(msg, "held by lease "+other.ID()) {
		t.Errorf("release of a lock another lease holds: stderr %q, want lease lost, held by lease %s", msg, other.ID())
	}
	if n := rdb.Exists(t.Context(), "fencelock:{taken-over}").Val(); n != 1 {
		t.Errorf("the other lease's lock is gone after release of the lost lease")
	}
}

func TestRelease_stdin(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	for _, form := range []string{"shell", "json", "bare"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			name := "stdin-" + form
			h := newHarness(t)
			args := []string{"acquire", "--redis", redisURL(s), name}
			if form == "json" {
				args = append(args[:1], append([]string{"--json"}, args[1:]...)...)
			}
			if code := h.run(args...); code != 0 {
				t.Fatalf("acquire exit = %d", code)
			}
			out := h.stdout.String()

			r := newHarness(t)
			switch form {
			case "shell", "json":
				r.stdin = out
			case "bare": // the secret alone, the token from the environment
				vars, err := parseShellAssignments(out)
				if err != nil {
					t.Fatal(err)
				}
				r.stdin = vars["FENCELOCK_SECRET"] + "\n"
				r.env = map[string]string{"FENCELOCK_TOKEN": vars["FENCELOCK_TOKEN"]}
			}
			if form == "json" {
				var info leaseInfo
				if err := json.Unmarshal([]byte(out), &info); err != nil || info.Secret == "" || info.Token <= 0 || info.Name != name {
					t.Fatalf("acquire --json = %s (%v), want name, token and secret", out, err)
				}
			}
			if code := r.run("release", "--redis", redisURL(s), name); code != 0 {
				t.Fatalf("release < %s exit = %d, want 0", form, code)
			}
			if n := rdb.Exists(t.Context(), "fencelock:{"+name+"}").Val(); n != 0 {
				t.Errorf("lock exists after release")
			}
		})
	}
}

package fencelock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A release publishes only if a waiter marked the lock since the last
// release: an uncontended release runs GET and DEL, as the bare minimum
// does. A native release (DELEX or DELIFEQ pipelined with PUBLISH) cannot
// test the mark and always publishes. The Lua path is checked on every
// server, through a user that may not run the native commands.
func TestRelease_publishesWhenWaited(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	rules := append([]string{"lua", "on", ">pw", "~*", "&*", "+@all"}, removeNatives(t, admin)...)
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER"}, toAny(rules)...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", rules, err)
	}
	lua := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "lua", Password: "pw"})
	t.Cleanup(func() { lua.Close() })
	native := serverOf(t, admin).wantRelease() != "evalsha"
	for _, tc := range []struct {
		name   string
		rdb    *redis.Client
		always bool // the release publishes whether or not anyone waits
	}{
		{"lua", lua, false},
		{"default", admin, native},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "published-" + tc.name
			channel, mark := "fencelock:{"+name+"}:released", "fencelock:{"+name+"}:waiters"
			ps := admin.Subscribe(ctx, channel)
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil { // the confirmation
				t.Fatal(err)
			}
			msgs := ps.Channel()
			next := func(what string) string {
				t.Helper()
				select {
				case m := <-msgs:
					return m.Payload
				case <-time.After(5 * time.Second):
					t.Fatalf("no message on %s within 5s: %s", channel, what)
					return ""
				}
			}
			// What a release published shows by whether it comes before a
			// marker published after it.
			released := func(what string) bool {
				t.Helper()
				if err := admin.Publish(ctx, channel, "marker").Err(); err != nil {
					t.Fatal(err)
				}
				switch p := next(what); p {
				case "":
					if p := next(what); p != "marker" {
						t.Fatalf("%s: second message %q, want the marker", what, p)
					}
					return true
				case "marker":
					return false
				default:
					t.Fatalf("%s: message %q, want \"\" or the marker", what, p)
					return false
				}
			}

			// Two Clients, as in two processes, each warmed up: a user who
			// may not run the native commands has the first release refused
			// (the PUBLISH pipelined with it runs), and each Client then
			// remembers to use Lua.
			c := fencelock.New(tc.rdb, &fencelock.Options{RenewInterval: -1, RetryInterval: time.Minute})
			other := fencelock.New(tc.rdb, &fencelock.Options{RetryInterval: time.Minute})
			for _, c := range []*fencelock.Client{c, other} {
				w, err := c.TryAcquire(ctx, "warm-up")
				if err != nil {
					t.Fatalf("TryAcquire error = %v", err)
				}
				if err := w.Release(ctx); err != nil {
					t.Fatalf("Release error = %v", err)
				}
			}
			l, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire error = %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release error = %v", err)
			}
			if got := released("release with no waiter"); got != tc.always {
				t.Errorf("release with no waiter published = %v, want %v", got, tc.always)
			}

			// A waiter in another Client marks the lock at its failed
			// attempt; the release publishes, which alone can wake it
			// within the test's bound (its fallback is a minute away).
			holder, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire error = %v", err)
			}
			got := make(chan error, 1)
			waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			go func() {
				w, err := other.Acquire(waitCtx, name)
				if err == nil {
					err = w.Release(ctx)
				}
				got <- err
			}()
			redistest.WaitFor(t, 5*time.Second, "the waiter to mark the lock and subscribe", func() bool {
				return admin.Exists(ctx, mark).Val() == 1 && admin.PubSubNumSub(ctx, channel).Val()[channel] == 2
			})
			if err := holder.Release(ctx); err != nil {
				t.Fatalf("Release error = %v", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter's Acquire and Release error = %v, want woken by the release", err)
			}
			if p := next("release with a waiter"); p != "" {
				t.Fatalf("release with a waiter: message %q, want its publish", p)
			}
			// The holder's release took the mark; the waiter, which got the
			// lock at its next attempt, set no new one, so its own release
			// published nothing.
			if !tc.always {
				if released("the waiter's release") {
					t.Errorf("the waiter's release published: want nothing, nobody waited for it")
				}
				if n := admin.Exists(ctx, mark).Val(); n != 0 {
					t.Errorf("waiter mark EXISTS = %d after the releases, want 0", n)
				}
			}
		})
	}
}

// A waiter's attempt never shortens a mark that another client's waiter
// set for longer, and sets one of its own lifetime otherwise.
func TestAcquire_markNotShortened(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const mark = "fencelock:{marked}:waiters"
	c := fencelock.New(rdb, &fencelock.Options{RetryInterval: 10 * time.Millisecond})
	holder, err := c.TryAcquire(ctx, "marked")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer holder.Release(ctx)
	attempt := func() {
		t.Helper()
		waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := fencelock.New(rdb, &fencelock.Options{RetryInterval: 10 * time.Millisecond}).Acquire(waitCtx, "marked"); err == nil {
			t.Fatal("Acquire of a held lock error = nil, want it to time out")
		}
	}
	rdb.Set(ctx, mark, "1", time.Hour)
	attempt()
	if pttl := rdb.PTTL(ctx, mark).Val(); pttl < 59*time.Minute {
		t.Errorf("mark PTTL = %v after a waiter with RetryInterval 10ms, want the other's hour kept", pttl)
	}
	rdb.Set(ctx, mark, "1", 5*time.Millisecond)
	attempt()
	// 3 × RetryInterval + 1s, from the last attempt.
	if pttl := rdb.PTTL(ctx, mark).Val(); pttl < 500*time.Millisecond || pttl > 1030*time.Millisecond {
		t.Errorf("mark PTTL = %v after a waiter with RetryInterval 10ms, want its own lifetime (1.03s) from its last attempt", pttl)
	}
}

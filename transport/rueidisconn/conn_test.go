package rueidisconn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport/rueidisconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func client(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A smoke test of the transport: a lock's life cycle, a waiter woken by a
// release in another Client, a semaphore, an election; the suites of
// tests/ run the whole promise set.
func TestSmoke(t *testing.T) {
	s := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	attempts := make(chan int, 10)
	a := rueidisconn.New(client(t, s.Addr()), &fencelock.Options{RetryInterval: time.Minute})
	b := rueidisconn.New(client(t, s.Addr()), &fencelock.Options{RetryInterval: time.Minute,
		Hooks: &fencelock.Hooks{AcquireAttempt: func(_ context.Context, i fencelock.AcquireAttemptInfo) { attempts <- i.Attempt }}})
	l, err := a.TryAcquire(ctx, "smoke")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := b.TryAcquire(ctx, "smoke"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v, want ErrNotAcquired", err)
	}
	<-attempts
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := b.Acquire(ctx, "smoke")
		if err == nil {
			if l2.Token() <= l.Token() {
				err = errors.New("token not greater")
			}
			l2.Release(ctx)
		}
		got <- err
	}()
	// The waiter, its retry a minute away, is woken by the release: its
	// second attempt comes once its subscription is confirmed.
	for n := 0; n < 2; n = <-attempts {
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	sem := a.Semaphore("smoke-sem", 2)
	p1, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("Semaphore.TryAcquire: %v", err)
	}
	p2, err := sem.TryAcquire(ctx)
	if err != nil || p2.Slot() == p1.Slot() {
		t.Fatalf("second permit: %v, %v", p2, err)
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("third permit of 2: %v", err)
	}
	p1.Release(ctx)
	p2.Release(ctx)
	e := a.Election("smoke-e")
	lead, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if who, err := b.Election("smoke-e").Leader(ctx); err != nil || who.Term != lead.Token() || who.Value != "a" {
		t.Fatalf("Leader = %+v, %v", who, err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// A lease whose Context someone follows learns at once that its lock was
// deleted under it: rueidis reads the server's invalidations as they come.
func TestWatch(t *testing.T) {
	s := redistest.New(t)
	admin := client(t, s.Addr())
	ctx := t.Context()
	c := rueidisconn.New(client(t, s.Addr()), &fencelock.Options{TTL: 10 * time.Minute, RenewInterval: time.Minute})
	l, err := c.TryAcquire(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, admin.B().Del().Key("fencelock:{watched}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease's Context still open 10s after its lock was deleted (next renewal in a minute)")
	}
	if cause := context.Cause(lctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("Context cause = %v, want ErrLeaseLost", cause)
	}
}

// The library detects the native commands by COMMAND INFO, whose entries
// hold RESP3 maps (key specifications) on the RESP3 connections rueidis
// speaks: a map must come back as its pairs, as go-redis gives them, and
// an unknown command's entry as nil, or the detection fails and the
// natives and a Cluster's sharded wake-ups go unused.
func TestProcess_commandInfo(t *testing.T) {
	s := redistest.New(t)
	cmd := redis.NewSliceCmd(t.Context(), "COMMAND", "INFO", "SET", "NOSUCHCOMMAND")
	if err := rueidisconn.Conn(client(t, s.Addr())).Process(t.Context(), cmd); err != nil {
		t.Fatalf("COMMAND INFO: %v", err)
	}
	reply := cmd.Val()
	if len(reply) != 2 || reply[0] == nil || reply[1] != nil {
		t.Fatalf("COMMAND INFO SET NOSUCHCOMMAND = %v; want SET's entry, then nil", reply)
	}
}

// Replies fill the command types the library reads as go-redis fills
// them: an integer past the small ones go boxes for free, a string, a
// status, a nil, and the server's NOSCRIPT error reply, which the
// library reads by its first word to send the script's source instead.
func TestProcess_replies(t *testing.T) {
	s := redistest.New(t)
	ctx := t.Context()
	c := rueidisconn.Conn(client(t, s.Addr()))
	if err := c.Process(ctx, redis.NewStatusCmd(ctx, "set", "k", "v")); err != nil {
		t.Fatalf("set: %v", err)
	}
	n := redis.NewIntCmd(ctx, "eval", "return tonumber(ARGV[1])", "1", "k", int64(1)<<40)
	if err := c.Process(ctx, n); err != nil || n.Val() != 1<<40 {
		t.Errorf("eval of an integer = %d, %v; want %d, nil", n.Val(), err, int64(1)<<40)
	}
	str := redis.NewStringCmd(ctx, "get", "k")
	if err := c.Process(ctx, str); err != nil || str.Val() != "v" {
		t.Errorf("get = %q, %v; want \"v\", nil", str.Val(), err)
	}
	st := redis.NewStatusCmd(ctx, "PING")
	if err := c.Process(ctx, st); err != nil || st.Val() != "PONG" {
		t.Errorf("PING = %q, %v; want PONG, nil", st.Val(), err)
	}
	if err := c.Process(ctx, redis.NewStringCmd(ctx, "get", "none")); err != redis.Nil {
		t.Errorf("get of no key: %v, want redis.Nil", err)
	}
	ns := redis.NewIntCmd(ctx, "evalsha", "0123456789012345678901234567890123456789", "1", "k")
	if err := c.Process(ctx, ns); !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Errorf("evalsha of an unknown script: %v, want a NOSCRIPT error reply", err)
	}
}

// Outside a Cluster the library's batcher gathers concurrent calls into
// one DoMulti: the transport does not claim to pipeline them itself.
func TestPipelines_standalone(t *testing.T) {
	s := redistest.New(t)
	if rueidisconn.Conn(client(t, s.Addr())).Pipelines() {
		t.Errorf("Pipelines() = true on a standalone server, want false (the library's batches)")
	}
}

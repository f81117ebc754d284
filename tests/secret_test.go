package tests

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// outputs captures everything the library tells the world: its log
// (through a text and a JSON handler, at every level), every hook event
// (formatted with %+v and %#v), and every error returned (Error and
// %+v). secrets are the owner values that must appear in none of it.
type outputs struct {
	log syncBuffer

	mu      sync.Mutex
	events  []string
	errs    []string
	kinds   map[string]int // hook events and errors seen, by kind
	secrets []string
}

func newOutputs() *outputs { return &outputs{kinds: map[string]int{}} }

func (o *outputs) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true}
	return slog.New(fanout{slog.NewTextHandler(&o.log, opts), slog.NewJSONHandler(&o.log, opts)})
}

func (o *outputs) hooks() *fencelock.Hooks {
	return &fencelock.Hooks{
		AcquireAttempt: func(_ context.Context, i fencelock.AcquireAttemptInfo) { o.event("AcquireAttempt", i) },
		AcquireDone:    func(_ context.Context, i fencelock.AcquireDoneInfo) { o.event("AcquireDone", i) },
		RenewDone:      func(_ context.Context, i fencelock.RenewDoneInfo) { o.event("RenewDone", i) },
		LeaseLost:      func(_ context.Context, i fencelock.LeaseLostInfo) { o.event("LeaseLost", i) },
		ReleaseDone:    func(_ context.Context, i fencelock.ReleaseDoneInfo) { o.event("ReleaseDone", i) },
	}
}

func (o *outputs) event(kind string, v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("%s %+v %#v", kind, v, v))
	o.kinds[kind]++
}

// err records err, if not nil, under kind, and returns it.
func (o *outputs) err(kind string, err error) error {
	if err != nil {
		o.mu.Lock()
		o.errs = append(o.errs, fmt.Sprintf("%s: %s | %+v", kind, err.Error(), err))
		o.kinds[kind]++
		o.mu.Unlock()
	}
	return err
}

// secret records the owner value of a lease, or one given to Attach.
func (o *outputs) secret(s string) {
	o.mu.Lock()
	o.secrets = append(o.secrets, s)
	o.mu.Unlock()
}

// lease records l's secret and its public parts, which are output too.
func (o *outputs) lease(l *fencelock.Lease) *fencelock.Lease {
	if l != nil {
		o.secret(l.Secret())
		o.event("public", fmt.Sprint(l.Name(), l.ID(), l.Token(), l.Fence(), l.Fence().String(), l.Deadline()))
	}
	return l
}

// fanout is a slog.Handler that hands every record to each handler.
type fanout []slog.Handler

func (f fanout) Enabled(context.Context, slog.Level) bool { return true }
func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range f {
		if err := h.Handle(ctx, r.Clone()); err != nil {
			return err
		}
	}
	return nil
}
func (f fanout) WithAttrs(as []slog.Attr) slog.Handler {
	g := make(fanout, len(f))
	for i, h := range f {
		g[i] = h.WithAttrs(as)
	}
	return g
}
func (f fanout) WithGroup(name string) slog.Handler {
	g := make(fanout, len(f))
	for i, h := range f {
		g[i] = h.WithGroup(name)
	}
	return g
}

// The owner secret leaves the library only through Lease.Secret: not in
// its log, not in any hook event, not in any error, over a life cycle
// with every kind of loss and failure the library reports (lost by
// deletion, by takeover and by deadline, failed renewals and releases,
// wrong types, refused permissions, too few replicas, a quorum without
// a majority) and the secrets given to Attach.
func TestSecret_neverOutput(t *testing.T) {
	t.Parallel()
	out := newOutputs()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	o := s.ClientOptions()
	// Requests to a paused server fail within the lease's deadline.
	o.MaxRetries, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled = -1, 200*time.Millisecond, 200*time.Millisecond, true
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	opts := fencelock.Options{
		TTL: 2 * time.Second, RenewInterval: 100 * time.Millisecond, RetryInterval: 50 * time.Millisecond,
		Logger: out.logger(), Hooks: out.hooks(),
	}
	c := newClient(t, rdb, &opts)
	acquire := func(name string) *fencelock.Lease {
		t.Helper()
		l, err := c.TryAcquire(ctx, name)
		if out.err("TryAcquire", err) != nil {
			t.Fatalf("TryAcquire(%q) error = %v", name, err)
		}
		return out.lease(l)
	}
	lost := func(l *fencelock.Lease) {
		t.Helper()
		select {
		case <-l.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("lease %s not lost within 10s", l.Name())
		}
		out.err("Cause", context.Cause(l.Context()))
	}

	// Held, contended, renewed, released.
	l := acquire("held")
	out.err("TryAcquire held", mustFail(t, func() error { _, err := c.TryAcquire(ctx, "held"); return err }))
	actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	out.err("Acquire held", mustFail(t, func() error { _, err := c.Acquire(actx, "held"); return err }))
	cancel()
	if out.err("Renew", l.Renew(ctx)) != nil {
		t.Fatal("Renew failed")
	}
	out.err("Release", l.Release(ctx))

	// Lost by deletion, then renewed and released.
	l = acquire("deleted")
	admin.Del(ctx, "fencelock:{deleted}")
	lost(l)
	out.err("Renew lost", mustFail(t, func() error { return l.Renew(ctx) }))
	out.err("Release lost", mustFail(t, func() error { return l.Release(ctx) }))

	// Lost by takeover; found at Release.
	l = acquire("taken")
	admin.Set(ctx, "fencelock:{taken}", "another owner", time.Minute)
	out.err("Release taken", mustFail(t, func() error { return l.Release(ctx) }))

	// Lost by deadline: the server pauses, renewals fail, the deadline passes.
	l = acquire("paused")
	s.Pause(t)
	lost(l)
	// Acquisition attempts that fail, and are retried, while it pauses.
	actx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
	out.err("Acquire paused", mustFail(t, func() error { _, err := c.Acquire(actx, "while-paused"); return err }))
	cancel()
	// A release that cannot reach the server.
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	out.err("Release paused", mustFail(t, func() error { return l.Release(rctx) }))
	cancel()
	s.Resume(t)

	// Wrong types: the lock, then the token counter.
	admin.LPush(ctx, "fencelock:{list}", "x")
	out.err("TryAcquire wrong type", mustFail(t, func() error { _, err := c.TryAcquire(ctx, "list"); return err }))
	admin.Set(ctx, "fencelock:{counter}:token", "not a number", 0)
	out.err("TryAcquire wrong counter", mustFail(t, func() error { _, err := c.TryAcquire(ctx, "counter"); return err }))
	wrongSecret := "attached-secret-0123456789abcdef"
	out.secret(wrongSecret)
	a, err := c.Attach("list", wrongSecret, 1)
	if out.err("Attach", err) != nil {
		t.Fatal(err)
	}
	out.err("Renew attached", mustFail(t, func() error { return a.Renew(ctx) }))
	out.err("Release attached", mustFail(t, func() error { return a.Release(ctx) }))
	tooLong := "too-long-secret-" + strings.Repeat("x", fencelock.MaxSecretLen)
	out.secret(tooLong)
	_, err = c.Attach("list", tooLong, 1)
	out.err("Attach invalid", mustFail(t, func() error { return err }))

	// Refused permissions, with a lease's real secret.
	held := acquire("guarded")
	setUser(t, "nokeys", aclRuleFor(t, admin, false, "other:"), s)
	refused := newClient(t, userClient(t, s, "nokeys"), &fencelock.Options{Logger: out.logger(), Hooks: out.hooks()})
	out.err("TryAcquire refused", mustFail(t, func() error { _, err := refused.TryAcquire(ctx, "guarded"); return err }))
	a, err = refused.Attach("guarded", held.Secret(), held.Token())
	if err != nil {
		t.Fatal(err)
	}
	out.err("Renew refused", mustFail(t, func() error { return a.Renew(ctx) }))
	out.err("Release refused", mustFail(t, func() error { return a.Release(ctx) }))
	out.err("Release guarded", held.Release(ctx))

	// Too few replicas: acquired, released again, refused.
	noReplicas := opts
	noReplicas.MinReplicas, noReplicas.ReplicaTimeout = 1, 100*time.Millisecond
	out.err("TryAcquire unreplicated", mustFail(t, func() error {
		_, err := newClient(t, rdb, &noReplicas).TryAcquire(ctx, "unreplicated")
		return err
	}))

	// Do, whose function fails after its lease was lost.
	out.err("Do", mustFail(t, func() error {
		return c.Do(ctx, "do", func(ctx context.Context, f fence.Fence) error {
			admin.Del(ctx, "fencelock:{do}")
			<-ctx.Done()
			return fmt.Errorf("work stopped: %w", context.Cause(ctx))
		})
	}))

	// A quorum: acquired with a node down, lost on a majority, and no
	// majority at all.
	nodes := []*redistest.Server{redistest.New(t), redistest.New(t), redistest.New(t)}
	var qrdb []redis.UniversalClient
	for _, n := range nodes {
		o := n.ClientOptions()
		o.MaxRetries, o.DialTimeout, o.ReadTimeout = -1, 200*time.Millisecond, 200*time.Millisecond
		r := redis.NewClient(o)
		t.Cleanup(func() { r.Close() })
		qrdb = append(qrdb, r)
	}
	q := newQuorum(t, qrdb, &opts)
	// Paused, not stopped: a stopped server's port may be taken by another
	// test's server meanwhile, which would then answer for the node.
	nodes[2].Pause(t)
	ql, err := q.TryAcquire(ctx, "quorum")
	if out.err("TryAcquire quorum", err) != nil {
		t.Fatal(err)
	}
	out.lease(ql)
	nodes[0].Client(t).Del(ctx, "fencelock:{quorum}")
	out.err("Renew quorum", mustFail(t, func() error { return ql.Renew(ctx) }))
	out.err("Release quorum", mustFail(t, func() error { return ql.Release(ctx) }))
	nodes[1].Pause(t)
	out.err("TryAcquire no quorum", mustFail(t, func() error { _, err := q.TryAcquire(ctx, "quorum"); return err }))

	out.mu.Lock()
	defer out.mu.Unlock()
	logText := out.log.snapshot().String()
	for _, kind := range []string{"AcquireAttempt", "AcquireDone", "RenewDone", "LeaseLost", "ReleaseDone"} {
		if out.kinds[kind] == 0 {
			t.Errorf("no %s event: the life cycle did not exercise it", kind)
		}
	}
	for _, msg := range []string{"lease lost", "renew failed", "acquire attempt failed"} {
		if !strings.Contains(logText, msg) {
			t.Errorf("log has no %q record: the life cycle did not exercise it", msg)
		}
	}
	if !strings.Contains(logText, l.ID()) {
		t.Errorf("log does not name lease %s: the capture is broken", l.ID())
	}
	channels := map[string]string{"log": logText, "hook events": strings.Join(out.events, "\n"), "errors": strings.Join(out.errs, "\n")}
	for _, secret := range out.secrets {
		for name, text := range channels {
			// A prefix too, in case something truncates.
			if i := strings.Index(text, secret[:12]); i >= 0 {
				t.Errorf("%s hold the owner secret %q:\n...%s...", name, secret, text[max(0, i-200):min(len(text), i+200)])
			}
		}
	}
	t.Logf("%d secrets, %d log bytes, %d hook events, %d errors searched", len(out.secrets), len(logText), len(out.events), len(out.errs))
}

// mustFail calls f and fails the test if it returns nil.
func mustFail(t *testing.T, f func() error) error {
	t.Helper()
	err := f()
	if err == nil {
		t.Fatalf("call succeeded, want an error")
	}
	return err
}

// A lease printed or logged as a value does not show its secret: with
// fmt's verbs, and through slog's text and JSON handlers.
func TestSecret_formattedLease(t *testing.T) {
	t.Parallel()
	c := newClient(t, redistest.New(t).Client(t), nil)
	l, err := c.TryAcquire(t.Context(), "formatted")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("held", "lease", l)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		fmt.Fprintf(&buf, verb+"\n", l)
	}
	if strings.Contains(buf.String(), l.Secret()) {
		t.Errorf("a formatted lease shows its secret:\n%s", buf.String())
	}
}

package fencetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// Report is one call of a fence.Hooks func that a Recorder received.
type Report struct {
	// Kind is the func called: "accepted", "stale" or "failed".
	Kind string
	// Info is what it was given.
	Info fence.AccessInfo
	// Ctx is the context it was given.
	Ctx context.Context
}

// Recorder keeps the reports of the fence.Hooks it returns, for tests of
// stores and adapters that report through hooks. The zero value is ready
// to use; it is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	reports []Report
}

// Hooks returns hooks whose every func records its report in r.
func (r *Recorder) Hooks() *fence.Hooks {
	rec := func(kind string) func(context.Context, fence.AccessInfo) {
		return func(ctx context.Context, info fence.AccessInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reports = append(r.reports, Report{Kind: kind, Info: info, Ctx: ctx})
		}
	}
	return &fence.Hooks{Accepted: rec("accepted"), Stale: rec("stale"), Failed: rec("failed")}
}

// Reports returns the reports received so far, in order, and forgets them.
func (r *Recorder) Reports() []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	reports := slices.Clone(r.reports)
	r.reports = nil
	return reports
}

// Want describes a report that a test expects: its kind, op and fence,
// and for a stale one the fence that refused it. Err, if set, must be in
// the reported error's chain (errors.Is); a failed report must carry an
// error in any case, an accepted one none.
type Want struct {
	Kind    string
	Op      string
	Fence   fence.Fence
	Current fence.Fence
	Err     error
}

// CheckReports fails the test unless reports, all for resource, are want,
// one for one and in order, each given the context ctx (or one derived
// from it).
func CheckReports(t *testing.T, reports []Report, ctx context.Context, resource string, want ...Want) {
	t.Helper()
	if len(reports) != len(want) {
		var got []string
		for _, r := range reports {
			got = append(got, r.Kind+" "+r.Info.Op)
		}
		t.Errorf("got %d reports %q, want %d (%+v)", len(reports), got, len(want), want)
		return
	}
	for i, w := range want {
		r := reports[i]
		info := r.Info
		switch {
		case r.Kind != w.Kind || info.Op != w.Op:
			t.Errorf("report %d: %s %s, want %s %s (%+v)", i, r.Kind, info.Op, w.Kind, w.Op, info)
		case info.Resource != resource || info.Fence != w.Fence:
			t.Errorf("report %d (%s %s): resource %q, fence %v; want %q, %v", i, r.Kind, info.Op, info.Resource, info.Fence, resource, w.Fence)
		case info.Current != w.Current:
			t.Errorf("report %d (%s %s): current %v, want %v", i, r.Kind, info.Op, info.Current, w.Current)
		case (w.Kind == "accepted") != (info.Err == nil):
			t.Errorf("report %d (%s %s): error %v", i, r.Kind, info.Op, info.Err)
		case w.Kind == "stale" && !errors.Is(info.Err, fence.ErrStale):
			t.Errorf("report %d (%s %s): error %v, want ErrStale", i, r.Kind, info.Op, info.Err)
		case w.Err != nil && !errors.Is(info.Err, w.Err):
			t.Errorf("report %d (%s %s): error %v, want %v", i, r.Kind, info.Op, info.Err, w.Err)
		case info.Latency < 0:
			t.Errorf("report %d (%s %s): latency %v", i, r.Kind, info.Op, info.Latency)
		case r.Ctx == nil || r.Ctx.Value(reportCtxKey{}) != ctx.Value(reportCtxKey{}):
			t.Errorf("report %d (%s %s): the hook got another context than the access's", i, r.Kind, info.Op)
		}
	}
}

// reportCtxKey marks the context of the accesses of RunHooks.
type reportCtxKey struct{}

// WithMark returns ctx with a value by which CheckReports knows it, or a
// context derived from it, again.
func WithMark(ctx context.Context, mark string) context.Context {
	return context.WithValue(ctx, reportCtxKey{}, mark)
}

// RunHooks checks that the store returned by newStore reports each of
// its fenced accesses (Put, Get, Delete) to h exactly once, with the
// access's context, as accepted, stale (with the fence that refused it)
// or failed (an invalid fence, a context that ended), and does not report
// Load. newStore must return an empty store that reports to h.
func RunHooks(t *testing.T, newStore func(t *testing.T, h *fence.Hooks) fence.Store) {
	t.Helper()
	var rec Recorder
	s := newStore(t, rec.Hooks())
	ctx := WithMark(t.Context(), t.Name())
	f9, f10, f11 := fenceOf(9, "a"), fenceOf(10, "b"), fenceOf(11, "c")
	invalid := fence.Fence{Lock: "orders", Token: 0, Lease: "x"}
	ended, cancel := context.WithCancel(ctx)
	cancel()

	s.Put(ctx, resource, f10, []byte("v"))
	s.Get(ctx, resource, f10)
	s.Put(ctx, resource, f9, []byte("old"))
	s.Get(ctx, resource, f9)
	s.Delete(ctx, resource, f9)
	s.Put(ctx, resource, invalid, []byte("bad"))
	s.Put(ended, resource, f11, []byte("late"))
	s.Load(ctx, resource)
	s.Delete(ctx, resource, f10)
	CheckReports(t, rec.Reports(), ctx, resource,
		Want{Kind: "accepted", Op: "put", Fence: f10},
		Want{Kind: "accepted", Op: "get", Fence: f10},
		Want{Kind: "stale", Op: "put", Fence: f9, Current: f10},
		Want{Kind: "stale", Op: "get", Fence: f9, Current: f10},
		Want{Kind: "stale", Op: "delete", Fence: f9, Current: f10},
		Want{Kind: "failed", Op: "put", Fence: invalid, Err: fence.ErrInvalid},
		Want{Kind: "failed", Op: "put", Fence: f11, Err: context.Canceled},
		Want{Kind: "accepted", Op: "delete", Fence: f10},
	)
}

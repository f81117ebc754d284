package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// TestHarness runs every scenario in a tiny mode so the harness cannot
// rot. It checks structure only, never timings: the machine is noisy.
func TestHarness(t *testing.T) {
	cfg := defaultConfig()
	cfg.quick(nil)
	cfg.dur = 100 * time.Millisecond
	cfg.contDur = 200 * time.Millisecond
	cfg.goroutines = 4
	cfg.rtOps = 10
	cfg.warmPairs = 3
	cfg.hold = 0
	r, err := run(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := append(contestants(), quorumContestants()...)
	// The harness's baseline row and the transport rows are only in the
	// pair tables.
	// The server-limit rows only in the parallel one.
	var plain, locks, transports, limits int
	for _, c := range all {
		switch {
		case c.limit != nil:
			limits++
			continue
		case !c.contendedOnly:
			plain++
		}
		if c.transport {
			transports++
		} else if !c.baseline {
			locks++
		}
	}
	if limits != 2 {
		t.Errorf("%d server-limit rows, want 2 (fencelock's scripts, floor+token's)", limits)
	}
	if len(r.uncontended) != plain || len(r.parallel) != plain+limits || len(r.roundTrips) != plain-1-transports || len(r.contended) != locks {
		t.Fatalf("rows: %d uncontended, %d parallel, %d round-trip, %d contended; want %d, %d, %d, %d",
			len(r.uncontended), len(r.parallel), len(r.roundTrips), len(r.contended), plain, plain+limits, plain-1-transports, locks)
	}
	for _, rows := range [][]pairRow{r.uncontended, r.parallel} {
		for _, row := range rows {
			// A call that outlived opTimeout on a starved machine is a
			// timing, not the harness's rot: logged, not failed.
			timedOut := row.errs != 0 && errors.Is(row.firstErr, context.DeadlineExceeded)
			if timedOut && row.perSec > 0 {
				t.Logf("%s: %d calls timed out (%v) on a busy machine, %.0f pairs/s", row.c.name, row.errs, row.firstErr, row.perSec)
			} else if row.errs != 0 || row.perSec <= 0 {
				t.Errorf("%s: %d errors (%v), %.0f pairs/s; want no errors and some pairs", row.c.name, row.errs, row.firstErr, row.perSec)
			}
			if row.c.floor && row.xFloor != 1 {
				t.Errorf("floor's ratio to itself = %v, want 1", row.xFloor)
			}
		}
	}
	for _, row := range r.contended {
		if row.violations != 0 || row.errs != 0 {
			t.Errorf("%s contended: %d double holds, %d errors (%v)", row.c.name, row.violations, row.errs, row.firstErr)
		}
	}
	// Round trips are structural: exact counts.
	want := map[string][3]float64{ // acquire, release, renew
		"floor":               {1, 1, 1},
		"floor+token":         {1, 1, 1},
		"fencelock":           {1, 1, 1},
		"fencelock/rueidis":   {1, 1, 1},
		"fencelock/valkey-go": {1, 1, 1},
		"redislock":           {1, 1, 1},
		"redsync":             {1, 1, 1},
		"redsync/redlock-3":   {1, 1, 1},
		// rueidislock renews by itself: no call to count.
		"rueidislock/one-key": {1, 1, 0},
	}
	for _, row := range r.roundTrips {
		if row.err != nil {
			t.Errorf("%s round trips: %v", row.c.name, row.err)
			continue
		}
		w, ok := want[row.c.name]
		if !ok {
			continue
		}
		got := [3]float64{row.res.acq.rounds, row.res.rel.rounds, row.res.renew.rounds}
		if got != w {
			t.Errorf("%s round trips acquire/release/renew = %v, want %v", row.c.name, got, w)
		}
		if row.c.floor && row.res.acq.rounds+row.res.rel.rounds != 2 {
			t.Errorf("floor: %v round trips per pair, want 2", row.res.acq.rounds+row.res.rel.rounds)
		}
		if row.c.name == "redsync/redlock-3" && row.res.acq.clientCmds != 3 {
			t.Errorf("redlock-3 acquire sends %v commands, want 3 (one per node)", row.res.acq.clientCmds)
		}
		// Three keys: two acquired in turn, the third meanwhile (it may
		// be counted with the next operation), all three released.
		if row.c.name == "rueidislock" && (row.res.acq.clientCmds < 2 || row.res.acq.clientCmds > 3 || row.res.rel.clientCmds < 2.5) {
			t.Errorf("rueidislock (3 keys) sends %v commands to acquire and %v to release, want 2-3 and 3",
				row.res.acq.clientCmds, row.res.rel.clientCmds)
		}
	}
	var out bytes.Buffer
	r.markdown(&out)
	for _, h := range []string{"### 1.", "### 2.", "### 3.", "### 4.", "### 6.", "| floor |", "Host: ", " system call ",
		"| server limit: fencelock |", "| fencelock | ", "% of fencelock's limit", "× rueidislock |"} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("report lacks %q:\n%s", h, out.String())
		}
	}
}

// TestHarness_curves runs the cost-curve scenarios (5, 7, 8, 9) in a tiny
// mode and draws their plots: structure only, never timings.
func TestHarness_curves(t *testing.T) {
	cfg := defaultConfig()
	cfg.quick(nil)
	cfg.scenarios = map[string]bool{"5": true, "7": true, "8": true, "9": true}
	cfg.dur = 100 * time.Millisecond
	cfg.contDur = 200 * time.Millisecond
	cfg.warmPairs = 3
	cfg.scaleGoroutines = []int{1, 4}
	cfg.waiters = []int{1, 10}
	cfg.held = []int{1, 100}
	cfg.heldWindow = 300 * time.Millisecond
	r, err := run(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != len(callBodies) {
		t.Errorf("%d redis.call costs, want %d", len(r.calls), len(callBodies))
	}
	if len(r.scaling) != len(scalingContestants) {
		t.Errorf("%d scaling rows, want %d", len(r.scaling), len(scalingContestants))
	}
	for _, row := range r.scaling {
		if len(row.perSec) != len(cfg.scaleGoroutines) {
			t.Errorf("%s: %d scaling points, want %d", row.c.name, len(row.perSec), len(cfg.scaleGoroutines))
		}
	}
	if len(r.waiters) != len(waitersContestants) {
		t.Errorf("%d waiters rows, want %d", len(r.waiters), len(waitersContestants))
	}
	for _, row := range r.waiters {
		if len(row.p50) != len(cfg.waiters) || row.violations != 0 || row.errs != 0 {
			t.Errorf("%s: %d waiters points, %d double holds, %d errors; want %d, 0, 0",
				row.c.name, len(row.p50), row.violations, row.errs, len(cfg.waiters))
		}
	}
	if len(r.held) != len(cfg.held) {
		t.Fatalf("%d held rows, want %d", len(r.held), len(cfg.held))
	}
	for _, row := range r.held {
		if row.lost != 0 || row.errs != 0 {
			t.Errorf("%d held leases: %d lost, %d errors; want none", row.n, row.lost, row.errs)
		}
	}
	dir := t.TempDir()
	if err := r.plot(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"scaling.png", "waiters.png", "held.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v, want a PNG", f, err)
		}
	}
	var out bytes.Buffer
	r.markdown(&out)
	for _, h := range []string{"### 5.", "### 7.", "### 8.", "### 9."} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("report lacks %q", h)
		}
	}
}

// TestRunLimit_success counts only the success paths: pairs whose
// release finds the lock held by another owner are errors, not pairs.
func TestRunLimit_success(t *testing.T) {
	srv, err := redistest.Launch(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rdb := newClient(srv.Addr())
	t.Cleanup(func() { rdb.Close() })
	for _, tc := range []struct {
		name string
		l    *serverLimit
		ok   bool
	}{
		{"fencelock", limitFencelock, true},
		{"floor+token", limitFloorToken, true},
		{"other owner's release", &serverLimit{
			acquire: limitFencelock.acquire, release: limitFencelock.release,
			encode: func(b []byte, acq, rel, key, owner string) []byte {
				lock, token, delay, channel := libKeys(key)
				b = appendCommand(b, "EVALSHA", acq, "3", lock, token, delay, owner, libTTL, libCounter, "0", "0")
				return appendCommand(b, "EVALSHA", rel, "1", lock, "another owner", channel, "PUBLISH")
			},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runLimit(t.Context(), tc.l, srv.Addr(), rdb, "t", 50*time.Millisecond)
			if tc.ok && (res.errs != 0 || res.pairs == 0) {
				t.Errorf("%d pairs, %d errors (%v); want some pairs, no errors", res.pairs, res.errs, res.firstErr)
			}
			if !tc.ok && (res.errs == 0 || res.pairs != 0) {
				t.Errorf("%d pairs, %d errors; want no pairs, errors", res.pairs, res.errs)
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencelock/fencelock"
)

// metrics is run's Prometheus exporter: counters and gauges fed by
// fencelock.Hooks, served in the text exposition format 0.0.4. It is
// written out by hand because the Prometheus client must not enter the
// library's module (package fenceprom, a module of its own, is the full
// collector for programs). Names and labels match fenceprom's, plus a
// "lock" label: run holds one lock, so it costs one series.
type metrics struct {
	mu       sync.Mutex
	lock     string
	attempts map[string]int64 // by result
	renewals map[string]int64
	releases map[string]int64
	lost     int64
	held     int64 // 1 while a lease is held
	token    int64 // the held lease's token, 0 if none
}

// The results each counter reports, in output order; all are written,
// zero or not, so that rates work from the first scrape.
var (
	attemptResults = []string{"acquired", "not_acquired", "error"}
	renewResults   = []string{"ok", "failed", "lost"}
	releaseResults = []string{"ok", "lost", "error"}
)

func newMetrics(lock string) *metrics {
	return &metrics{
		lock:     lock,
		attempts: map[string]int64{},
		renewals: map[string]int64{},
		releases: map[string]int64{},
	}
}

// hooks returns the hooks that feed m.
func (m *metrics) hooks() *fencelock.Hooks {
	return &fencelock.Hooks{
		AcquireAttempt: func(_ context.Context, i fencelock.AcquireAttemptInfo) {
			result := "error"
			switch {
			case i.Err == nil:
				result = "acquired"
			case errors.Is(i.Err, fencelock.ErrNotAcquired):
				result = "not_acquired"
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			m.attempts[result]++
		},
		AcquireDone: func(_ context.Context, i fencelock.AcquireDoneInfo) {
			if i.Err != nil {
				return
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			m.held, m.token = 1, i.Token
		},
		RenewDone: func(_ context.Context, i fencelock.RenewInfo) {
			result := "failed"
			switch {
			case i.Err == nil:
				result = "ok"
			case errors.Is(i.Err, fencelock.ErrLeaseLost):
				result = "lost"
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			m.renewals[result]++
		},
		LeaseLost: func(context.Context, fencelock.LostInfo) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.lost++
			m.held, m.token = 0, 0
		},
		ReleaseDone: func(_ context.Context, i fencelock.ReleaseInfo) {
			result := "error"
			switch {
			case i.Err == nil:
				result = "ok"
			case errors.Is(i.Err, fencelock.ErrLeaseLost):
				result = "lost"
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			m.releases[result]++
			m.held, m.token = 0, 0
		},
	}
}

// contentType is that of the text exposition format.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// write writes m in the text exposition format.
func (m *metrics) write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	lock := `lock="` + escapeLabel(m.lock) + `"`
	family := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	byResult := func(name, help string, results []string, counts map[string]int64) {
		family(name, "counter", help)
		for _, r := range results {
			fmt.Fprintf(&b, "%s{%s,result=\"%s\"} %d\n", name, lock, r, counts[r])
		}
	}
	byResult("fencelock_acquire_attempts_total", "Acquisition round trips, by result.", attemptResults, m.attempts)
	byResult("fencelock_renewals_total", "Renewal round trips, by result.", renewResults, m.renewals)
	byResult("fencelock_releases_total", "Releases, by result.", releaseResults, m.releases)
	family("fencelock_leases_lost_total", "counter", "Leases lost.")
	fmt.Fprintf(&b, "fencelock_leases_lost_total{%s} %d\n", lock, m.lost)
	family("fencelock_leases_held", "gauge", "1 while the lease is held.")
	fmt.Fprintf(&b, "fencelock_leases_held{%s} %d\n", lock, m.held)
	family("fencelock_lease_token", "gauge", "Fencing token of the held lease, 0 if none.")
	fmt.Fprintf(&b, "fencelock_lease_token{%s} %d\n", lock, m.token)
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeLabel escapes a label value: backslash, double quote and newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// ServeHTTP serves m at /metrics.
func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", contentType)
	m.write(w)
}

// serveMetrics serves m on addr at /metrics until stop is called; stop
// returns once the server has shut down.
func serveMetrics(addr string, m *metrics) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}

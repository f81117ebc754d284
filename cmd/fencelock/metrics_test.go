package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs http://addr/metrics and returns its samples by series,
// name{label="value",...} with labels sorted, parsed by Prometheus's own
// text parser, and the page itself.
func scrape(t *testing.T, addr string) (map[string]float64, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text exposition format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return samples(families), string(body)
}

// metricsAddr returns a free loopback address for --metrics-addr.
func metricsAddr(t *testing.T) string {
	t.Helper()
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// waitSample scrapes addr until series reaches at least want, failing
// the test after 15s.
func waitSample(t *testing.T, addr, series string, want float64) map[string]float64 {
	t.Helper()
	var got map[string]float64
	var page string
	deadline := time.Now().Add(15 * time.Second)
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		if got, page = scrape(t, addr); got[series] >= want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 15s, want at least %v\n%s", series, got[series], want, page)
		}
		time.Sleep(backoff) // polling an HTTP endpoint, bounded by the deadline
	}
}

// run --metrics-addr serves fenceprom's metrics of the lease, labelled
// with the lock's name, while COMMAND runs: an acquisition, the lease
// held, renewals; and stops serving when run returns.
func TestRun_metricsAddr(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	addr := metricsAddr(t)
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "--ttl", "10s", "--metrics-addr", addr, "metered", "--"}, h.self("trap")...)
	done := h.start(args...)
	h.stdout.waitFor(t, "ready")

	got := waitSample(t, addr, `fencelock_renewals_total{lock="metered",result="ok"}`, 1)
	for series, want := range map[string]float64{
		`fencelock_leases_held{lock="metered"}`:                              1,
		`fencelock_acquire_attempts_total{lock="metered",result="acquired"}`: 1,
		`fencelock_acquires_total{lock="metered",result="acquired"}`:         1,
		`fencelock_acquire_attempt_duration_seconds_count{lock="metered"}`:   1,
		`fencelock_leases_lost_total{lock="metered"}`:                        0,
		`fencelock_renewals_total{lock="metered",result="lost"}`:             0,
		`fencelock_releases_total{lock="metered",result="ok"}`:               0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	for series := range got {
		if strings.HasPrefix(series, "go_") || strings.HasPrefix(series, "process_") || !strings.Contains(series, `lock="metered"`) {
			t.Errorf("series %s: want only fenceprom's, for the lock", series)
		}
	}

	h.signal(syscall.SIGTERM)
	if code := h.exit(done); code != 3 {
		t.Fatalf("run exit = %d, want the command's 3", code)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("GET /metrics after run returned: %s, want the server gone", resp.Status)
	}
}

func TestRun_metricsAddrInvalid(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "--metrics-addr", "256.0.0.1:bad", "metered", "--"}, h.self("exit")...)
	if code := h.run(args...); code != exitUsage {
		t.Errorf("run --metrics-addr 256.0.0.1:bad exit = %d, want %d", code, exitUsage)
	}
	if !strings.Contains(h.stderr.String(), "--metrics-addr") {
		t.Errorf("stderr = %q, want it to name --metrics-addr", h.stderr)
	}
	if n := s.Client(t).Exists(t.Context(), "fencelock:{metered}:token").Val(); n != 0 {
		t.Errorf("a token was issued despite the bad --metrics-addr")
	}
}

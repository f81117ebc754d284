package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// parseExposition parses the text exposition format 0.0.4 strictly
// enough to catch what a Prometheus server would reject: every sample
// belongs to a family declared by # TYPE before it, names and label names
// are valid, label values are quoted and escaped, values are numbers, and
// no series repeats. It returns the samples keyed by series, with label
// values unescaped: name{a="x",b="y"}, labels sorted.
func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	var (
		nameRE   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
		labelRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
		types    = map[string]string{}
		samples  = map[string]float64{}
		lastType string
	)
	if !strings.HasSuffix(text, "\n") {
		t.Errorf("exposition does not end with a newline")
	}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) {
			t.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kind, rest, _ := strings.Cut(rest, " ")
			name, arg, _ := strings.Cut(rest, " ")
			switch kind {
			case "HELP":
			case "TYPE":
				if _, dup := types[name]; dup {
					fail("second TYPE for %s", name)
				}
				if !slices.Contains([]string{"counter", "gauge", "untyped"}, arg) {
					fail("type %q, want counter, gauge or untyped", arg)
				}
				types[name], lastType = arg, name
			default:
				continue // a comment
			}
			if !nameRE.MatchString(name) {
				fail("metric name %q is invalid", name)
			}
			continue
		}
		// No timestamps: the value follows the last space (label values
		// may hold spaces).
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			fail("no value")
			continue
		}
		series, value := line[:i], line[i+1:]
		if _, err := strconv.ParseFloat(value, 64); err != nil {
			fail("value %q: %v", value, err)
		}
		name, labels, hasLabels := strings.Cut(series, "{")
		if name != lastType {
			fail("sample of %s outside its family (last TYPE %q)", name, lastType)
		}
		if types[name] == "counter" && !strings.HasSuffix(name, "_total") {
			fail("counter %s does not end in _total", name)
		}
		var pairs []string
		if hasLabels {
			body, ok := strings.CutSuffix(labels, "}")
			if !ok {
				fail("labels not closed")
				continue
			}
			for body != "" {
				lname, rest, ok := strings.Cut(body, `="`)
				if !ok || !labelRE.MatchString(lname) {
					fail("bad label name in %q", body)
					break
				}
				var v strings.Builder
				i := 0
				for ; i < len(rest) && rest[i] != '"'; i++ {
					if rest[i] == '\\' && i+1 < len(rest) {
						i++
						switch rest[i] {
						case 'n':
							v.WriteByte('\n')
						case '\\', '"':
							v.WriteByte(rest[i])
						default:
							fail("bad escape \\%c", rest[i])
						}
						continue
					}
					v.WriteByte(rest[i])
				}
				if i == len(rest) {
					fail("label value not closed")
					break
				}
				pairs = append(pairs, lname+"="+strconv.Quote(v.String()))
				body = strings.TrimPrefix(rest[i+1:], ",")
			}
		}
		slices.Sort(pairs)
		key := name + "{" + strings.Join(pairs, ",") + "}"
		if _, dup := samples[key]; dup {
			fail("series %s repeated", key)
		}
		samples[key], _ = strconv.ParseFloat(value, 64)
	}
	return samples
}

func TestMetrics_write(t *testing.T) {
	lock := "odd \"name\" \\ with\nnewline"
	m := newMetrics(lock)
	h := m.hooks()
	ctx := t.Context()
	h.AcquireAttempt(ctx, fencelock.AcquireAttemptInfo{Name: lock, Err: fencelock.ErrNotAcquired})
	h.AcquireAttempt(ctx, fencelock.AcquireAttemptInfo{Name: lock, Token: 42})
	h.AcquireDone(ctx, fencelock.AcquireDoneInfo{Name: lock, Token: 42})
	h.RenewDone(ctx, fencelock.RenewInfo{Name: lock})
	h.RenewDone(ctx, fencelock.RenewInfo{Name: lock, Err: errors.New("i/o timeout")})

	var b strings.Builder
	if err := m.write(&b); err != nil {
		t.Fatalf("write() error = %v", err)
	}
	got := parseExposition(t, b.String())
	l := "lock=" + strconv.Quote(lock)
	for series, want := range map[string]float64{
		`fencelock_acquire_attempts_total{` + l + `,result="acquired"}`:     1,
		`fencelock_acquire_attempts_total{` + l + `,result="not_acquired"}`: 1,
		`fencelock_acquire_attempts_total{` + l + `,result="error"}`:        0,
		`fencelock_renewals_total{` + l + `,result="ok"}`:                   1,
		`fencelock_renewals_total{` + l + `,result="failed"}`:               1,
		`fencelock_renewals_total{` + l + `,result="lost"}`:                 0,
		`fencelock_leases_lost_total{` + l + `}`:                            0,
		`fencelock_leases_held{` + l + `}`:                                  1,
		`fencelock_lease_token{` + l + `}`:                                  42,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", series, v, ok, want, b.String())
		}
	}

	h.LeaseLost(ctx, fencelock.LostInfo{Name: lock})
	h.ReleaseDone(ctx, fencelock.ReleaseInfo{Name: lock, Err: fencelock.ErrLeaseLost})
	b.Reset()
	m.write(&b)
	got = parseExposition(t, b.String())
	for series, want := range map[string]float64{
		`fencelock_leases_lost_total{` + l + `}`:                  1,
		`fencelock_releases_total{` + l + `,result="lost"}`:       1,
		`fencelock_leases_held{` + l + `}`:                        0,
		`fencelock_lease_token{` + l + `}`:                        0,
		`fencelock_releases_total{` + l + `,result="ok"}`:         0,
		`fencelock_acquire_attempts_total{` + l + `,result="ok"}`: -1, // absent
	} {
		v, ok := got[series]
		if want < 0 {
			if ok {
				t.Errorf("%s present, want absent", series)
			}
			continue
		}
		if !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", series, v, ok, want, b.String())
		}
	}
}

// run --metrics-addr serves the lease's metrics while COMMAND runs, and
// stops serving when run returns.
func TestRun_metricsAddr(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "--metrics-addr", addr, "metered", "--"}, h.self("trap")...)
	done := h.start(args...)
	h.stdout.waitFor(t, "ready")

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type = %q, want %q", ct, contentType)
	}
	token, err := rdb.Get(t.Context(), "fencelock:{metered}:token").Int64()
	if err != nil {
		t.Fatalf("GET token: %v", err)
	}
	got := parseExposition(t, string(body))
	for series, want := range map[string]float64{
		`fencelock_leases_held{lock="metered"}`:                              1,
		`fencelock_lease_token{lock="metered"}`:                              float64(token),
		`fencelock_acquire_attempts_total{lock="metered",result="acquired"}`: 1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v\n%s", series, got[series], want, body)
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

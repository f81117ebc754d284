package main

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fencelock/fencelock/internal/redistest"
)

// pushRequest is one request a pushgateway got: its method, grouping key (from
// the path) and the metric families of its body, as the Pushgateway reads
// them (expfmt's decoder, for the Content-Type sent).
type pushRequest struct {
	method   string
	grouping map[string]string
	families map[string]*dto.MetricFamily
	err      error
}

// pushgateway is an HTTP server that speaks the Pushgateway's protocol
// for PUT and POST /metrics/job/JOB{/LABEL/VALUE}: it decodes what it
// gets, and answers status.
type pushgateway struct {
	*httptest.Server
	mu     sync.Mutex
	pushes []pushRequest
	status int
}

func newPushgateway(t *testing.T, status int) *pushgateway {
	g := &pushgateway{status: status}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pushRequest{method: r.Method, grouping: map[string]string{}, families: map[string]*dto.MetricFamily{}}
		parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/metrics/"), "/")
		if len(parts)%2 != 0 || !strings.HasPrefix(r.URL.EscapedPath(), "/metrics/") {
			p.err = &strconvError{"path " + r.URL.EscapedPath()}
		}
		for i := 0; i+1 < len(parts); i += 2 {
			k, v := parts[i], parts[i+1]
			if name, ok := strings.CutSuffix(k, "@base64"); ok {
				b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(v, "="))
				if err != nil {
					p.err = err
				}
				k, v = name, string(b)
			}
			p.grouping[k] = v
		}
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			mf := &dto.MetricFamily{}
			if err := dec.Decode(mf); err == io.EOF {
				break
			} else if err != nil {
				p.err = err
				break
			}
			p.families[mf.GetName()] = mf
		}
		g.mu.Lock()
		g.pushes = append(g.pushes, p)
		g.mu.Unlock()
		w.WriteHeader(g.status)
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *pushgateway) got() []pushRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.pushes)
}

type strconvError struct{ s string }

func (e *strconvError) Error() string { return "unexpected " + e.s }

// samples flattens metric families to name{label="value",...} → value,
// labels sorted; a histogram gives its _count.
func samples(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			slices.Sort(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_count{"+strings.Join(labels, ",")+"}"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// run --metrics-push pushes the lease's metrics once, when run exits
// (the release counted), to a Pushgateway: PUT, job "fencelock", grouped
// by the lock's name (base64 in the path where the name has a /), and
// without a lock label of their own, which the grouping key gives them.
func TestRun_metricsPush(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, name := range []string{"pushed", "nightly/report"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			g := newPushgateway(t, http.StatusOK)
			h := newHarness(t)
			h.childEnv = append(h.childEnv, "FENCELOCK_TEST_CODE=3")
			if code := h.run(append([]string{"run", "--redis", redisURL(s), "--metrics-push", g.URL, name, "--"}, h.self("exit")...)...); code != 3 {
				t.Fatalf("run exit = %d, want COMMAND's 3", code)
			}
			pushes := g.got()
			if len(pushes) != 1 {
				t.Fatalf("%d pushes, want 1", len(pushes))
			}
			p := pushes[0]
			if p.err != nil {
				t.Fatalf("the push does not parse: %v", p.err)
			}
			if p.method != http.MethodPut || len(p.grouping) != 2 || p.grouping["job"] != "fencelock" || p.grouping["lock"] != name {
				t.Errorf("push %s with grouping key %v, want PUT with job=fencelock, lock=%s", p.method, p.grouping, name)
			}
			got := samples(p.families)
			for series, want := range map[string]float64{
				`fencelock_acquires_total{result="acquired"}`:        1,
				`fencelock_acquire_attempt_duration_seconds_count{}`: 1,
				`fencelock_releases_total{result="ok"}`:              1,
				`fencelock_leases_held{}`:                            0,
			} {
				if v, ok := got[series]; !ok || v != want {
					t.Errorf("%s = %v (present %v), want %v\npushed: %v", series, v, ok, want, got)
				}
			}
		})
	}
}

// A push that fails is said on stderr, and changes nothing else: the
// exit status stays COMMAND's.
func TestRun_metricsPushFails(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	g := newPushgateway(t, http.StatusInternalServerError)
	h := newHarness(t)
	// With a password in the URL, which no message shows.
	withPassword := strings.Replace(g.URL, "http://", "http://user:s3cret-pw@", 1)
	if code := h.run(append([]string{"run", "--redis", redisURL(s), "--metrics-push", withPassword, "push-fails", "--"}, h.self("env")...)...); code != 0 {
		t.Errorf("run exit = %d, want COMMAND's 0", code)
	}
	got := h.stderr.String()
	if !strings.HasPrefix(got, "fencelock run: --metrics-push "+strings.Replace(g.URL, "http://", "http://user:xxxxx@", 1)+": ") || !strings.Contains(got, "500") {
		t.Errorf("stderr = %q, want it to say the push failed (500)", got)
	}
	if strings.Contains(got, "s3cret-pw") {
		t.Errorf("stderr = %q shows the password", got)
	}
	if ps := g.got(); len(ps) != 1 {
		t.Errorf("%d pushes, want 1", len(ps))
	}
}

// run --metrics-textfile writes the lease's metrics, each with the lock's
// name as a label, to a file for the node exporter's textfile collector,
// when run exits.
func TestRun_metricsTextfile(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	file := filepath.Join(t.TempDir(), "fencelock.prom")
	h := newHarness(t)
	if code := h.run(append([]string{"run", "--redis", redisURL(s), "--metrics-textfile", file, "textfile", "--"}, h.self("env")...)...); code != 0 {
		t.Fatalf("run exit = %d, want 0", code)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s does not parse: %v", file, err)
	}
	got := samples(families)
	for series, want := range map[string]float64{
		`fencelock_acquires_total{lock="textfile",result="acquired"}`: 1,
		`fencelock_releases_total{lock="textfile",result="ok"}`:       1,
		`fencelock_leases_held{lock="textfile"}`:                      0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v\nwritten: %v", series, v, ok, want, got)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm()&0o044 == 0 {
		t.Errorf("%s: %v, mode %v: want it readable by the node exporter", file, err, fi.Mode())
	}
}

// Metrics outputs that cannot work are usage errors before anything is
// sent: no token is issued.
func TestRun_metricsOutputsUsage(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	dir := t.TempDir()
	promDir := filepath.Join(dir, "d.prom")
	if err := os.Mkdir(promDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-push", "ftp://gateway:9091"}, "--metrics-push ftp://gateway:9091: want an http:// or https:// URL"},
		{[]string{"--metrics-push", "gateway:9091"}, "--metrics-push gateway:9091: want an http:// or https:// URL"},
		{[]string{"--metrics-push", "http://"}, "--metrics-push http://: want an http:// or https:// URL"},
		{[]string{"--metrics-push", "ftp://u:s3cret-pw@gateway"}, "--metrics-push ftp://u:xxxxx@gateway: want an http:// or https:// URL"},
		{[]string{"--metrics-textfile", filepath.Join(dir, "fencelock.txt")}, "the node exporter's textfile collector reads only files named *.prom"},
		{[]string{"--metrics-textfile", filepath.Join(dir, "missing", "fencelock.prom")}, "cannot create a file there"},
		{[]string{"--metrics-textfile", promDir}, "is not a regular file"},
	} {
		h := newHarness(t)
		args := append(append([]string{"run", "--redis", redisURL(s)}, tc.args...), "outputs-usage", "--", "true")
		if code := h.run(args...); code != exitUsage {
			t.Errorf("run %q: exit = %d, want %d", tc.args, code, exitUsage)
		}
		if got := h.stderr.String(); !strings.Contains(got, tc.want) {
			t.Errorf("run %q: stderr = %q, want it to say %q", tc.args, got, tc.want)
		}
	}
	if n := s.Client(t).Exists(t.Context(), "fencelock:{outputs-usage}:token").Val(); n != 0 {
		t.Errorf("a token was issued despite the bad flags")
	}
}

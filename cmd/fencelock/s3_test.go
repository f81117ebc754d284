package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/s3fence"
	"github.com/fencelock/fencelock/fence/s3fence/s3test"
	"github.com/fencelock/fencelock/internal/redistest"
)

// TestS3 runs put and doctor --resource against one SeaweedFS (its start
// takes seconds), each case in a bucket of its own.
func TestS3(t *testing.T) {
	srv := s3test.New(t)
	id, secret := srv.Credentials()
	// s3harness is a harness whose environment reaches srv.
	s3harness := func(t *testing.T, endpoint string) *harness {
		h := newHarness(t)
		h.env["AWS_ACCESS_KEY_ID"] = id
		h.env["AWS_SECRET_ACCESS_KEY"] = secret
		h.env["AWS_ENDPOINT_URL_S3"] = endpoint
		return h
	}
	load := func(t *testing.T, bucket, key string) (string, fence.Fence) {
		t.Helper()
		v, f, err := s3fence.New(srv.Client(srv.Endpoint()), bucket, nil).Load(t.Context(), key)
		if err != nil {
			t.Fatalf("Load(%s) = %v", key, err)
		}
		return string(v), f
	}
	f1 := fence.Fence{Lock: "state", Token: 1, Lease: "a"}
	f2 := fence.Fence{Lock: "state", Token: 2, Lease: "b"}

	t.Run("put", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		url := "s3://" + bucket + "/state/prod.tfstate"
		h := s3harness(t, srv.Endpoint())
		h.env["FENCELOCK_FENCE"] = f2.String()
		h.stdin = "v2"
		if code := h.run("put", url); code != exitOK {
			t.Fatalf("put with %v = exit %d, want 0", f2, code)
		}
		if v, f := load(t, bucket, "state/prod.tfstate"); v != "v2" || f != f2 {
			t.Errorf("object = %q, %v; want v2, %v", v, f, f2)
		}

		// The older fence is refused: 124, the fence named, nothing written.
		h = s3harness(t, srv.Endpoint())
		h.stdin = "v1"
		if code := h.run("put", "--fence", f1.String(), url); code != exitStale {
			t.Errorf("put with the older %v = exit %d, want %d", f1, code, exitStale)
		}
		if msg := h.stderr.String(); !strings.Contains(msg, "stale") || strings.Count(msg, "\n") != 1 {
			t.Errorf("stderr = %q, want one line that says stale", msg)
		}
		if v, f := load(t, bucket, "state/prod.tfstate"); v != "v2" || f != f2 {
			t.Errorf("object after the stale put = %q, %v; want v2, %v", v, f, f2)
		}
	})

	t.Run("put usage", func(t *testing.T) {
		for _, c := range []struct {
			env  string // FENCELOCK_FENCE
			args []string
		}{
			{"", []string{"put", "s3://b/k"}},
			{f1.String(), []string{"put"}},
			{f1.String(), []string{"put", "s3://b/k", "extra"}},
			{f1.String(), []string{"put", "http://b/k"}},
			{f1.String(), []string{"put", "s3://b"}},
			{f1.String(), []string{"put", "s3://B/k"}},
			{"12;lock=x", []string{"put", "s3://b/k"}},
			{f1.String(), []string{"put", "--endpoint", "ftp://x", "s3://b/k"}},
			{f1.String(), []string{"put", "--timeout", "0s", "s3://b/k"}},
		} {
			h := s3harness(t, srv.Endpoint())
			if c.env != "" {
				h.env["FENCELOCK_FENCE"] = c.env
			}
			if code := h.run(c.args...); code != exitUsage {
				t.Errorf("FENCELOCK_FENCE=%q fencelock %s = exit %d, want %d", c.env, strings.Join(c.args, " "), code, exitUsage)
			}
		}
	})

	t.Run("put unreachable", func(t *testing.T) {
		h := s3harness(t, "http://127.0.0.1:1") // nothing listens there
		h.env["FENCELOCK_FENCE"] = f1.String()
		if code := h.run("put", "--timeout", "5s", "s3://b/k"); code != exitInternal {
			t.Errorf("put to a closed port = exit %d, want %d", code, exitInternal)
		}
	})

	// A shell job under fencelock run writes with the fence run gave it.
	t.Run("put under run", func(t *testing.T) {
		redis := redistest.New(t)
		bucket := srv.NewBucket(t)
		h := s3harness(t, srv.Endpoint())
		h.env["REDIS_URL"] = redisURL(redis)
		// COMMAND's fencelock is this test binary in main mode; it reads
		// the real environment.
		h.childEnv = append(h.childEnv, mainEnv+"=1", "AWS_ACCESS_KEY_ID="+id, "AWS_SECRET_ACCESS_KEY="+secret,
			"AWS_ENDPOINT_URL_S3="+srv.Endpoint(), "AWS_REGION="+s3test.Region)
		script := `printf 'written by %s' "$FENCELOCK_TOKEN" | "$0" put s3://` + bucket + `/report`
		if code := h.run("run", "job", "--", "sh", "-c", script, os.Args[0]); code != exitOK {
			t.Fatalf("run job -- sh -c %q = exit %d, want 0", script, code)
		}
		v, f := load(t, bucket, "report")
		if f.Lock != "job" || v != "written by "+itoa64(f.Token) {
			t.Errorf("object = %q with %v, want what the job wrote with its fence", v, f)
		}
	})

	t.Run("doctor", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		h := s3harness(t, srv.Endpoint())
		if code := h.run("doctor", "--resource", "s3://"+bucket+"/locks", "--json"); code != exitOK {
			t.Fatalf("doctor --resource on SeaweedFS = exit %d, want 0", code)
		}
		var rep struct {
			Resource string
			Findings []s3fence.Finding
			Critical int
		}
		if err := json.Unmarshal([]byte(h.stdout.String()), &rep); err != nil {
			t.Fatalf("doctor --json output: %v", err)
		}
		checks := map[string]bool{}
		for _, f := range rep.Findings {
			checks[f.Check] = true
			if f.Severity != s3fence.SevOK {
				t.Errorf("finding %+v, want ok", f)
			}
		}
		for _, c := range []string{"if-match", "if-none-match", "race", "cleanup"} {
			if !checks[c] {
				t.Errorf("no %s finding in %+v", c, rep.Findings)
			}
		}
		if rep.Resource != "s3://"+bucket+"/locks/" || rep.Critical != 0 {
			t.Errorf("report %+v, want resource s3://%s/locks/ and no critical finding", rep, bucket)
		}
	})

	// The negative control: a store that drops the conditional headers.
	t.Run("doctor ignored conditions", func(t *testing.T) {
		bucket := srv.NewBucket(t)
		h := s3harness(t, srv.IgnoreConditions(t))
		if code := h.run("doctor", "--resource", "s3://"+bucket); code != exitCritical {
			t.Fatalf("doctor --resource on a store that ignores the conditions = exit %d, want %d", code, exitCritical)
		}
		out := h.stdout.String()
		for _, w := range []string{"CRITICAL  if-match", "CRITICAL  if-none-match", "CRITICAL  race", "fix: do not rely on s3fence"} {
			if !strings.Contains(out, w) {
				t.Errorf("doctor output lacks %q:\n%s", w, out)
			}
		}
	})

	t.Run("doctor unreachable", func(t *testing.T) {
		h := s3harness(t, "http://127.0.0.1:1")
		if code := h.run("doctor", "--resource", "s3://b/"); code != exitInternal {
			t.Errorf("doctor --resource on a closed port = exit %d, want %d", code, exitInternal)
		}
	})
}

func itoa64(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

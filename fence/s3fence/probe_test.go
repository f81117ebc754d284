package s3fence_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fencelock/fencelock/fence/s3fence"
	"github.com/fencelock/fencelock/fence/s3fence/s3test"
)

// severities returns each check's worst severity.
func severities(fs []s3fence.Finding) map[string]string {
	rank := map[string]int{s3fence.SevOK: 0, s3fence.SevInfo: 1, s3fence.SevWarn: 2, s3fence.SevCritical: 3}
	m := map[string]string{}
	for _, f := range fs {
		if cur, ok := m[f.Check]; !ok || rank[f.Severity] > rank[cur] {
			m[f.Check] = f.Severity
		}
	}
	return m
}

// TestProbe: SeaweedFS enforces the conditions (the reason it is the
// test server), and the probe leaves nothing behind.
func TestProbe(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.Endpoint())
	bucket := srv.NewBucket(t)
	fs, err := s3fence.Probe(t.Context(), c, bucket, "locks/", &s3fence.ProbeOptions{Writers: 8, Rounds: 3})
	if err != nil {
		t.Fatalf("Probe = %v", err)
	}
	want := map[string]string{"create": "ok", "read-after-write": "ok", "if-none-match": "ok", "if-match": "ok", "race": "ok", "cleanup": "ok"}
	if got := severities(fs); !equal(got, want) {
		t.Errorf("Probe findings by check = %v, want %v; findings: %+v", got, want, fs)
	}
	out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil || len(out.Contents) != 0 {
		t.Errorf("objects left in the bucket: %d, %v; want none", len(out.Contents), err)
	}
}

// TestProbe_ignoredConditions is the probe's negative control: a store
// that accepts the conditional headers and ignores them (a proxy that
// drops them in front of SeaweedFS) is critical on every condition.
func TestProbe_ignoredConditions(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client(srv.IgnoreConditions(t))
	bucket := srv.NewBucket(t)
	fs, err := s3fence.Probe(t.Context(), c, bucket, "", &s3fence.ProbeOptions{Writers: 4, Rounds: 1})
	if err != nil {
		t.Fatalf("Probe = %v", err)
	}
	got := severities(fs)
	if got["if-none-match"] != "critical" || got["if-match"] != "critical" || got["race"] != "critical" || got["cleanup"] != "ok" {
		t.Errorf("Probe findings by check = %v, want if-none-match, if-match and race critical and the cleanup done; findings: %+v", got, fs)
	}
	for _, f := range fs {
		if f.Severity == s3fence.SevCritical && (f.Fix == "" || !strings.Contains(f.Message, "ACCEPTED")) {
			t.Errorf("critical finding %+v: want what was accepted, and a fix", f)
		}
	}
}

// TestProbe_unreachable: a store that cannot be reached is an error, not
// a finding.
func TestProbe_unreachable(t *testing.T) {
	srv := s3test.Shared(t)
	c := srv.Client("http://127.0.0.1:1") // a port nothing listens on
	_, err := s3fence.Probe(t.Context(), c, "b", "", nil)
	if err == nil {
		t.Errorf("Probe of a closed port = nil error, want one")
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

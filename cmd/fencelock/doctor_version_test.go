package main

import (
	"strings"
	"testing"
)

// The server check warns below the oldest version of each flavour that
// the test matrix runs (Redis 7.0, Valkey 9.0), and passes from it on.
func TestDoctor_serverVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		info map[string]string
		sev  string
		want string
	}{
		{map[string]string{"redis_version": "6.2.14"}, sevWarn, "Redis 6.2.14 is older than 7.0, the oldest release fencelock is tested on"},
		{map[string]string{"redis_version": "7.0.15"}, sevOK, "Redis 7.0.15"},
		{map[string]string{"redis_version": "8.6.3"}, sevOK, "Redis 8.6.3"},
		{map[string]string{"server_name": "valkey", "redis_version": "7.2.4", "valkey_version": "8.1.1"}, sevWarn, "Valkey 8.1.1 is older than 9.0, the oldest release fencelock is tested on"},
		{map[string]string{"server_name": "valkey", "redis_version": "7.2.4", "valkey_version": "9.1.2"}, sevOK, "Valkey 9.1.2"},
	} {
		rep := &doctorReport{}
		checkServer(rep, tc.info, 0)
		if len(rep.Findings) == 0 {
			t.Fatalf("checkServer(%v): no findings", tc.info)
		}
		f := rep.Findings[0]
		if f.Check != "server" || f.Severity != tc.sev || !strings.Contains(f.Message, tc.want) {
			t.Errorf("checkServer(%v) = %+v, want a %s server finding %q", tc.info, f, tc.sev, tc.want)
		}
	}
}

package main

import (
	"net/url"
	"strings"
	"testing"
)

// URLs with a password in the query string, as go-redis's URL parameters
// take one (password=, for Sentinel) and as users write one anyway: in
// any case, after a separator url.ParseQuery refuses (;), with an escape
// it cannot decode, or next to a bad value.
func queryPasswordURLs(host string) []string {
	return []string{
		"redis://" + host + "/?password=sekrit",
		"redis://" + host + "/?Password=sekrit",
		"redis://" + host + "/?PASSWORD=sekrit&db=1",
		"redis://" + host + "/?password=sekrit;x",
		"redis://" + host + "/?db=0;password=sekrit",
		"redis://" + host + "/?password=sek%zzrit",
		"redis://" + host + "/?pass%77ord=sekrit",
		"redis://" + host + "/?password=sekrit&dial_timeout=bad",
		"redis://" + host + "/?sentinel_password=sekrit",
		"redis+sentinel://" + host + "/m?password=sekrit",
		"redis+sentinel://" + host + "/m?sentinel_password=sekrit;x",
		"redis+cluster://" + host + "?password=sekrit",
		"redis+cluster://" + host + "?a=1;password=sekrit",
		"unix:///tmp/no.sock?password=sekrit;",
	}
}

// Through the URL parser: neither its errors nor the URL as shown in
// messages repeat the password.
func TestRedisOptions_queryPassword(t *testing.T) {
	t.Parallel()
	for _, raw := range queryPasswordURLs("127.0.0.1:1") {
		if _, err := redisOptions(raw, func(string) string { return "" }); err != nil && strings.Contains(err.Error(), "sekrit") {
			t.Errorf("redisOptions(%q) error %q reveals the password", raw, err)
		}
		if shown := redactedURL(raw); strings.Contains(shown, "sekrit") || !strings.Contains(shown, "xxxxx") {
			t.Errorf("redactedURL(%q) = %q, want the password masked", raw, shown)
		}
	}
}

// Through the CLI: whatever fails (the URL, the connection), stderr does
// not show the password.
func TestCLI_queryPasswordNeverShown(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(closedURL(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range queryPasswordURLs(u.Host) {
		for _, args := range [][]string{{"status", "--timeout", "1s", "x"}, {"acquire", "--timeout", "1s", "x"}, {"doctor", "--timeout", "1s"}} {
			h := newHarness(t)
			if code := h.run(append([]string{args[0], "--redis", raw}, args[1:]...)...); code == 0 {
				t.Errorf("fencelock %s --redis %s: exit 0, want a failure", args[0], raw)
			}
			if strings.Contains(h.stderr.String()+h.stdout.String(), "sekrit") {
				t.Errorf("fencelock %s --redis %s: output reveals the password:\n%s%s", args[0], raw, h.stdout, h.stderr)
			}
		}
	}
}

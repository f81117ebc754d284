package main

import (
	"net/url"
	"strings"
	"testing"
)

func FuzzRedisOptions(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379", "rediss://user:secretpw@host:6380/2", "unix:///tmp/r.sock?db=1",
		"redis://:secretpw@h/x", "redis://u:secretpw@[::1", "http://u:secretpw@h", "redis+sentinel://u:secretpw@h/m",
		"redis://u:secretpw@h/?dial_timeout=bad",
		"redis+sentinel://u:secretpw@h1:1,h2:2/m/0", "rediss+sentinel://u:secretpw@h/m?addr=secretpw",
		"redis+sentinel://u:secretpw@h/m?password=secretpw", "redis+cluster://u:secretpw@h1,h2:2?dial_timeout=secretpw",
		"rediss+cluster://:secretpw@h/5", "redis+cluster://u:secretpw@h:secretpw",
		"redis://h/?password=secretpw", "redis://h/?Password=secretpw", "redis://h/?password=secretpw;x",
		"redis://h/?db=0;password=secretpw", "redis://h/?password=secret%zzpw", "redis://h/?pass%77ord=secretpw",
		"redis://h/?password=secretpw&dial_timeout=secretpw", "redis+cluster://h?a=1;sentinel_password=secretpw",
		"0?pAss=secretpw0&secretpw", "0?pass=secretpw&secretpw", "?pAss=secretpw:&secretpw",
		"127.0.0.1:6379", "localhost:6379", "[::1]:6379", "u:secretpw@h:6379", "secretpw:6379",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := redisOptions(raw, func(string) string { return "" })
		if err == nil {
			return
		}
		// Whatever went wrong, the message must not repeat the URL's
		// password, nor anything of a URL that does not parse, but a bare
		// host:port (no userinfo), which it shows with its URL form.
		if hostPort(raw) {
			if !strings.Contains(err.Error(), "write redis://"+raw) {
				t.Fatalf("redisOptions(%q) error %q, want the URL form of host:port", raw, err)
			}
			return
		}
		pw, shown := "secretpw", ""
		if u, perr := url.Parse(raw); perr == nil {
			pw, _ = u.User.Password()
			shown = u.Redacted() // the password may also be the user or host
		}
		if strings.Contains(pw, "secretpw") && strings.Count(err.Error(), pw) > strings.Count(shown, pw) {
			t.Fatalf("redisOptions(%q) error %q reveals the password", raw, err)
		}
		// Nor a password among the query options, where it is the only
		// place the URL has it: neither the URL as the error shows it nor
		// what the error says of it. The value itself is the secret: a
		// key that shares some of its letters ("?pass=secretpw0&secretpw")
		// is shown as written, and may run into the message's own text
		// ("?pass=secretpw:&secretpw", then ": unsupported scheme").
		if u, perr := url.Parse(raw); perr == nil {
			query, shown := u.RawQuery, redact(u)
			msg := strings.TrimPrefix(err.Error(), "--redis "+shown+": ")
			for _, qpw := range querySecrets(query) {
				if strings.Contains(qpw, "secretpw") && strings.Count(raw, "secretpw") == strings.Count(query, "secretpw") &&
					(strings.Contains(shown, qpw) || strings.Contains(msg, qpw)) {
					t.Fatalf("redisOptions(%q) error %q reveals the query's password", raw, err)
				}
			}
		}
	})
}

func TestRedisOptions_topologies(t *testing.T) {
	t.Parallel()
	env := map[string]string{"REDIS_USERNAME": "app", "REDIS_PASSWORD": "masterpw"}
	getenv := func(k string) string { return env[k] }

	got, err := redisOptions("redis+sentinel://sen:sentpw@s2,s1:5000/mymaster/3?dial_timeout=2s&addr=[::1]:5002", getenv)
	if err != nil {
		t.Fatalf("sentinel URL: %v", err)
	}
	f := got.failover
	if f == nil || got.node != nil || got.cluster != nil {
		t.Fatalf("sentinel URL gave %+v, want failover options only", got)
	}
	if want := []string{"s2:26379", "s1:5000", "[::1]:5002"}; strings.Join(f.SentinelAddrs, " ") != strings.Join(want, " ") {
		t.Errorf("SentinelAddrs = %q, want %q", f.SentinelAddrs, want)
	}
	if f.MasterName != "mymaster" || f.DB != 3 || f.DialTimeout.String() != "2s" || f.TLSConfig != nil {
		t.Errorf("failover options: master %q, db %d, dial timeout %v, TLS %v; want mymaster, 3, 2s, none", f.MasterName, f.DB, f.DialTimeout, f.TLSConfig)
	}
	if f.SentinelUsername != "sen" || f.SentinelPassword != "sentpw" || f.Username != "app" || f.Password != "masterpw" {
		t.Errorf("credentials: sentinel %q/%q, master %q/%q; want sen/sentpw from the URL, app/masterpw from the environment",
			f.SentinelUsername, f.SentinelPassword, f.Username, f.Password)
	}
	if got, err := redisOptions("rediss+sentinel://s1:5000/m", getenv); err != nil || got.failover.TLSConfig == nil {
		t.Errorf("rediss+sentinel: %+v, %v; want TLS", got, err)
	}

	got, err = redisOptions("redis+cluster://c1:7000,c2:7001?addr=c3:7002&read_only=true", getenv)
	if err != nil {
		t.Fatalf("cluster URL: %v", err)
	}
	c := got.cluster
	if c == nil || got.node != nil || got.failover != nil {
		t.Fatalf("cluster URL gave %+v, want cluster options only", got)
	}
	if want := []string{"c1:7000", "c2:7001", "c3:7002"}; strings.Join(c.Addrs, " ") != strings.Join(want, " ") {
		t.Errorf("Addrs = %q, want %q", c.Addrs, want)
	}
	if c.Username != "app" || c.Password != "masterpw" || !c.ReadOnly {
		t.Errorf("cluster options: %q/%q, read only %v; want app/masterpw from the environment, true", c.Username, c.Password, c.ReadOnly)
	}
	if got, err := redisOptions("rediss+cluster://u:urlpw@c1:7000", getenv); err != nil || got.cluster.TLSConfig == nil || got.cluster.Password != "urlpw" {
		t.Errorf("rediss+cluster with userinfo: %+v, %v; want TLS and the URL's password", got, err)
	}
}

func TestTopologyURL_usage(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"redis+sentinel://127.0.0.1:1",                                 // no master
		"redis+sentinel://127.0.0.1:1/",                                // no master
		"redis+sentinel://127.0.0.1:1/m/0/x",                           // too deep
		"redis+sentinel://127.0.0.1:1/m/db",                            // db not a number
		"redis+sentinel://127.0.0.1:1/m?master_name=n",                 // two names
		"redis+sentinel://127.0.0.1:1/m?password=secretpw",             // master password in argv
		"redis+sentinel://127.0.0.1:1,/m",                              // empty host
		"redis+sentinel://127.0.0.1:x,127.0.0.1:2/m",                   // bad port
		"redis+sentinel://127.0.0.1:1/m?addr=nohostport",               // bad addr param
		"redis+sentinel://127.0.0.1:1/m?bogus=1",                       // unknown option
		"sentinel://127.0.0.1:1/m",                                     // scheme without redis+
		"redis+cluster://127.0.0.1:1/3",                                // a database
		"redis+cluster://127.0.0.1:1?bogus=1",                          // unknown option
		"redis+cluster://u:secretpw@127.0.0.1:1?dial_timeout=secretpw", // bad value
		"redis+cluster://",                                             // no node
		"cluster://127.0.0.1:1",
		"http://127.0.0.1:1",       // not Redis
		"secretpw://:secretpw@h:1", // found by FuzzRedisOptions: the scheme was quoted again
	} {
		h := newHarness(t)
		if got := h.run("status", "--redis", raw, "name"); got != exitUsage {
			t.Errorf("status --redis %s: exit = %d, want %d (usage)", raw, got, exitUsage)
		}
		if strings.Count(h.stderr.String(), "secretpw") > strings.Count(strings.ReplaceAll(raw, ":secretpw@", ":xxxxx@"), "secretpw") {
			t.Errorf("status --redis %s: stderr %q reveals the password", raw, h.stderr)
		}
	}
	h := newHarness(t)
	if got := h.run("demo", "--redis", "redis+cluster://127.0.0.1:1"); got != exitUsage {
		t.Errorf("demo --redis redis+cluster://: exit = %d, want %d (usage)", got, exitUsage)
	}
}

// A bare host:port, as redis-cli's -h and -p or a Docker port mapping
// write it, is not a URL: the message says what to write instead.
func TestRedisOptions_hostPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"127.0.0.1:6379", "fencelock status: --redis 127.0.0.1:6379: not a URL: write redis://127.0.0.1:6379 (run 'fencelock status -h' for usage)"},
		{"localhost:6379", "fencelock status: --redis localhost:6379: not a URL: write redis://localhost:6379 (run 'fencelock status -h' for usage)"},
		{"[::1]:6379", "fencelock status: --redis [::1]:6379: not a URL: write redis://[::1]:6379 (run 'fencelock status -h' for usage)"},
		{"pw@host:6379", "fencelock status: --redis: not a URL (run 'fencelock status -h' for usage)"},
	} {
		h := newHarness(t)
		if code := h.run("status", "--redis", tc.url, "x"); code != exitUsage {
			t.Errorf("status --redis %s: exit = %d, want %d", tc.url, code, exitUsage)
		}
		if got := strings.TrimSuffix(h.stderr.String(), "\n"); got != tc.want {
			t.Errorf("status --redis %s:\n got %s\nwant %s", tc.url, got, tc.want)
		}
	}
}

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The CLI against a Sentinel group and a Cluster, through the URL forms
// of --redis. One deployment per test function: each takes seconds to
// start.

func TestSentinelURL(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	url := "redis+sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + redistest.MasterName
	rdb := g.Client(t, nil)
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		testRunPassesToken(t, url, rdb)
	})
	t.Run("scripts", func(t *testing.T) {
		t.Parallel()
		testScriptRoundTrip(t, url, rdb)
	})
	t.Run("addr-param", func(t *testing.T) {
		t.Parallel()
		// One Sentinel in the host, the others as go-redis's addr=.
		a := g.SentinelAddrs()
		h := newHarness(t)
		if code := h.run("status", "--redis", "redis+sentinel://"+a[0]+"/"+redistest.MasterName+"?addr="+a[1]+"&addr="+a[2], "nobody"); code != 0 {
			t.Errorf("status via ?addr= exit = %d, want 0", code)
		}
	})
	t.Run("doctor", func(t *testing.T) {
		t.Parallel()
		code, rep, fs := doctorJSONURL(t, url)
		if code != 0 {
			t.Errorf("doctor exit = %d, want 0 (no critical finding): %+v", code, rep.Findings)
		}
		wantFinding(t, fs, "mode", sevOK, "the master that the Sentinels name")
		wantFinding(t, fs, "replication", sevWarn, "2 replicas") // the master's, not a Sentinel's
		wantFinding(t, fs, "lock", sevOK, "tokens")
	})
}

func TestClusterURL(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t)
	a := c.Addrs()
	url := "redis+cluster://" + a[0] + "," + a[1]
	rdb := c.Client(t, nil)
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		testRunPassesToken(t, url, rdb)
	})
	t.Run("scripts", func(t *testing.T) {
		t.Parallel()
		testScriptRoundTrip(t, url, rdb)
	})
	t.Run("doctor", func(t *testing.T) {
		t.Parallel()
		code, rep, _ := doctorJSONURL(t, url)
		if code != 0 {
			t.Errorf("doctor exit = %d, want 0 (no critical finding): %+v", code, rep.Findings)
		}
		nodes := map[string]bool{}
		var mode, lock string
		for _, f := range rep.Findings {
			if addr, _, ok := strings.Cut(f.Message, ": "); ok && f.Check == "server" {
				nodes[addr] = true
			}
			switch f.Check {
			case "mode":
				mode = f.Severity + " " + f.Message
			case "lock":
				lock = f.Severity + " " + f.Message
			}
		}
		if len(nodes) != 3 {
			t.Errorf("doctor audited the servers %v, want the 3 masters", nodes)
		}
		if !strings.HasPrefix(mode, "ok Cluster of 3 masters") {
			t.Errorf("doctor mode finding = %q, want ok, Cluster of 3 masters", mode)
		}
		if !strings.HasPrefix(lock, "ok ") {
			t.Errorf("doctor lock finding = %q, want ok", lock)
		}
	})
}

// testRunPassesToken runs COMMAND under a lock through url and checks
// it got the stored token and that run released the lock.
func testRunPassesToken(t *testing.T, url string, rdb redis.UniversalClient) {
	h := newHarness(t)
	args := append([]string{"run", "--redis", url, "topology-run", "--"}, h.self("env")...)
	if code := h.run(args...); code != 0 {
		t.Fatalf("run exit = %d, want 0", code)
	}
	stored, err := rdb.Get(t.Context(), "fencelock:{topology-run}:token").Int64()
	if err != nil {
		t.Fatalf("GET token: %v", err)
	}
	if got, want := h.stdout.String(), "FENCELOCK_TOKEN="+strconv.FormatInt(stored, 10)+"\n"; !strings.Contains(got, want) {
		t.Errorf("COMMAND printed %q, want %q", got, want)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{topology-run}").Val(); n != 0 {
		t.Errorf("lock exists after run = %d, want released", n)
	}
}

// testScriptRoundTrip runs acquire, status and release through url.
func testScriptRoundTrip(t *testing.T, url string, rdb redis.UniversalClient) {
	ctx := t.Context()
	h := newHarness(t)
	if code := h.run("acquire", "--redis", url, "--ttl", "30s", "topology-script"); code != 0 {
		t.Fatalf("acquire exit = %d, want 0", code)
	}
	vars, err := parseShellAssignments(h.stdout.String())
	if err != nil {
		t.Fatalf("parse acquire output: %v\n%s", err, h.stdout)
	}
	if got, want := vars["FENCELOCK_TOKEN"], rdb.Get(ctx, "fencelock:{topology-script}:token").Val(); got != want {
		t.Errorf("FENCELOCK_TOKEN = %q, want the stored token %q", got, want)
	}

	h = newHarness(t)
	if code := h.run("status", "--json", "--redis", url, "topology-script"); code != 0 {
		t.Fatalf("status exit = %d, want 0", code)
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, h.stdout)
	}
	token, _ := strconv.ParseInt(vars["FENCELOCK_TOKEN"], 10, 64)
	if !st.Held || st.Lease != vars["FENCELOCK_LEASE"] || st.Token != token || st.TTLms <= 0 {
		t.Errorf("status = %+v, want held by lease %s with token %d and a TTL", st, vars["FENCELOCK_LEASE"], token)
	}

	h = newHarness(t)
	h.env = vars
	if code := h.run("release", "--redis", url); code != 0 {
		t.Fatalf("release exit = %d, want 0", code)
	}
	if n := rdb.Exists(ctx, "fencelock:{topology-script}").Val(); n != 0 {
		t.Errorf("lock exists after release = %d, want 0", n)
	}
	h = newHarness(t)
	if code := h.run("status", "--json", "--redis", url, "topology-script"); code != 0 || !strings.Contains(h.stdout.String(), `"held":false`) {
		t.Errorf("status after release: exit %d, output %q; want 0 and held false", code, h.stdout)
	}
}

func doctorJSONURL(t *testing.T, url string) (int, doctorReport, map[string]finding) {
	t.Helper()
	h := newHarness(t)
	code := h.run("doctor", "--json", "--redis", url)
	var rep doctorReport
	if err := json.Unmarshal([]byte(h.stdout.String()), &rep); err != nil {
		t.Fatalf("doctor --json output does not parse: %v\n%s", err, h.stdout)
	}
	fs := map[string]finding{}
	for _, f := range rep.Findings {
		fs[f.Check] = f
	}
	return code, rep, fs
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

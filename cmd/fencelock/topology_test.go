package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

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

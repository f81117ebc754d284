package tests

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// server names the server a test talks to, from INFO server: Valkey 8+
// reports valkey_version, every server redis_version.
type server struct {
	valkey       bool
	major, minor int
}

func (s server) String() string {
	name := "Redis"
	if s.valkey {
		name = "Valkey"
	}
	return name + " " + strconv.Itoa(s.major) + "." + strconv.Itoa(s.minor)
}

func serverOf(t *testing.T, rdb redis.Cmdable) server {
	t.Helper()
	info, err := rdb.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	var s server
	version := fields["redis_version"]
	if v, ok := fields["valkey_version"]; ok {
		s.valkey, version = true, v
	}
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("INFO server: version %q unreadable", version)
	}
	s.major, _ = strconv.Atoi(parts[0])
	s.minor, _ = strconv.Atoi(parts[1])
	return s
}

// wantRelease is the command that releases a lock on s: DELEX on Redis
// 8.4+, DELIFEQ on Valkey 9+, else the Lua script (EVALSHA). Renewal uses
// SET IFEQ where release is native. The version decides here, not
// COMMAND INFO, so that the library's own detection is checked against an
// independent oracle.
func (s server) wantRelease() string {
	switch {
	case !s.valkey && (s.major > 8 || s.major == 8 && s.minor >= 4):
		return "delex"
	case s.valkey && s.major >= 9:
		return "delifeq"
	}
	return "evalsha"
}

func (s server) wantRenew() string {
	if s.wantRelease() == "evalsha" {
		return "evalsha"
	}
	return "set"
}

// Release and renew use DELEX / DELIFEQ / SET IFEQ on the servers that
// have them, and the Lua scripts elsewhere: the commands sent are checked
// against the server's version on each server of the matrix.
func TestClient_nativeCommands(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	srv := serverOf(t, rdb)
	rec := &recorder{}
	rdb.AddHook(rec)
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "native")
	if err != nil {
		t.Fatal(err)
	}
	rec.reset()
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	_, renew := rec.reset()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, release := rec.reset()
	// The renewal may detect the natives first (COMMAND INFO).
	renew = slices.DeleteFunc(renew, func(name string) bool { return name == "command" })
	if len(renew) == 0 || renew[0] != srv.wantRenew() {
		t.Errorf("%v: Renew sent %v, want %s first", srv, renew, srv.wantRenew())
	}
	if len(release) == 0 || release[0] != srv.wantRelease() {
		t.Errorf("%v: Release sent %v, want %s first", srv, release, srv.wantRelease())
	}
}

// removeNatives returns ACL rules that take DELEX and DELIFEQ away, for
// those of them the server has (SET cannot go: the acquire script needs
// it).
func removeNatives(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	info, err := rdb.Do(t.Context(), "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for i, name := range []string{"delex", "delifeq"} {
		if info[i] != nil {
			rules = append(rules, "-"+name)
		}
	}
	return rules
}

// An ACL user who may run the scripts but not DELEX or DELIFEQ (COMMAND
// INFO still lists them) releases through the Lua script: the refusal
// (NOPERM) falls back at once, and the next release goes to Lua directly.
// A user who may not run SET renews an attached lease through Lua too.
func TestClient_nativeRefused(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	rules := append([]string{"lua", "on", ">pw", "~*", "&*", "+@all"}, removeNatives(t, admin)...)
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER"}, toAny(rules)...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", rules, err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "noset", "on", ">pw", "~*", "&*", "+@all", "-set").Err(); err != nil {
		t.Fatalf("ACL SETUSER noset: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), Username: "lua", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	rec := &recorder{}
	rdb.AddHook(rec)
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	for i := range 2 {
		l, err := c.TryAcquire(ctx, "refused")
		if err != nil {
			t.Fatalf("TryAcquire error = %v", err)
		}
		rec.reset()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d by a user without DELEX/DELIFEQ: error = %v, want nil (the Lua fallback)", i, err)
		}
		_, names := rec.reset()
		if n := admin.Exists(ctx, "fencelock:{refused}").Val(); n != 0 {
			t.Fatalf("release %d: lock EXISTS = %d, want 0", i, n)
		}
		if i == 1 && (slices.Contains(names, "delex") || slices.Contains(names, "delifeq")) {
			t.Errorf("second release sent %v: want Lua only, the refusal remembered", names)
		}
	}

	l, err := newClient(t, admin, nil).TryAcquire(ctx, "renewed")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer l.Release(ctx)
	noset := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), Username: "noset", Password: "pw"})
	t.Cleanup(func() { noset.Close() })
	attached, err := newClient(t, noset, nil).Attach("renewed", l.Secret(), l.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := attached.Renew(ctx); err != nil {
		t.Errorf("Renew by a user without SET: error = %v, want nil (the Lua fallback)", err)
	}
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// A Cluster whose masters differ in what they offer, as mid rolling
// upgrade (here one master refuses the native commands through its ACL):
// each master gets what it can run, and a lock on either master renews and
// releases.
func TestCluster_mixedNatives(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	rdb := cl.Client(t, nil)
	ctx := t.Context()
	names := map[*redistest.Server]string{}
	for i := 0; len(names) < 2; i++ {
		name := "mixed" + strconv.Itoa(i)
		if m := cl.MasterOf(t, "{"+name+"}"); names[m] == "" {
			names[m] = name
		}
	}
	var refusing string
	for m, name := range names {
		rules := removeNatives(t, m.Client(t))
		if len(rules) == 0 {
			break // the server has none: every master runs Lua
		}
		for _, s := range []*redistest.Server{m, cl.ReplicaOf(t, m)} {
			if err := s.Client(t).Do(ctx, append([]any{"ACL", "SETUSER", "default"}, toAny(rules)...)...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		refusing = name
		break
	}
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	for round := range 2 {
		for _, name := range names {
			l, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire(%q) error = %v", name, err)
			}
			if err := l.Renew(ctx); err != nil {
				t.Errorf("round %d: Renew(%q) error = %v, want nil", round, name, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("round %d: Release(%q) error = %v, want nil (refusing master: %q)", round, name, err, refusing)
			}
		}
	}
}

// A lease whose lock key was replaced by a value of another type (a hash)
// is lost, not an error, on every server: Redis 8's DELEX IFEQ refuses a
// key that is not a string with an ERR reply, Valkey's DELIFEQ with
// WRONGTYPE, the Lua script finds no owner. The hash is left alone.
func TestLease_Release_lockReplaced(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)
	l, err := c.TryAcquire(ctx, "replaced")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	rdb.Del(ctx, "fencelock:{replaced}")
	rdb.HSet(ctx, "fencelock:{replaced}", "f", "v")
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release of a lock replaced by a hash (%v) error = %v, want ErrLeaseLost", serverOf(t, rdb), err)
	}
	if got := rdb.HGet(ctx, "fencelock:{replaced}", "f").Val(); got != "v" {
		t.Errorf("hash field after Release = %q, want %q", got, "v")
	}
}

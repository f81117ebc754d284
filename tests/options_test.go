package tests

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
	"github.com/fencelock/fencelock/transport/rueidisconn"
	"github.com/fencelock/fencelock/transport/valkeyconn"
	"github.com/redis/go-redis/v9"
)

// invalidOptions are Options that New refuses, one rule each.
var invalidOptions = []fencelock.Options{
	{TTL: -time.Second},
	{TTL: time.Millisecond},
	{TTL: 25 * time.Hour},
	{TTL: time.Second, RenewInterval: time.Second},
	{RetryInterval: -1},
	{MinReplicas: -1},
	{TTL: time.Second, ReplicaTimeout: 2 * time.Second},
	{TTL: time.Second, ReplicaTimeout: time.Microsecond},
	{TTL: time.Hour, TokenRetention: time.Minute},
	{TokenRetention: math.MaxInt64},
	{TokenRetention: fencelock.MaxTokenRetention + 1},
	{TTL: time.Second, NodeTimeout: time.Second - fencelock.Drift(time.Second)},
	{TTL: time.Second, ReplicaTimeout: time.Second},
	{RenewInterval: time.Microsecond},
	{RetryInterval: time.Microsecond},
	{NodeTimeout: time.Microsecond},
	{Prefix: "{}"},
	{Prefix: "jobs{}:"},
	{Prefix: "a}{}{x}"},
	{Prefix: strings.Repeat("p", fencelock.MaxNameLen+1)},
}

// Validate applies New's rules without a Redis client: every Options that
// New refuses it refuses with the same error, wrapping ErrInvalid, and the
// defaults (nil, the zero Options) and the documented extremes pass.
func TestOptions_Validate(t *testing.T) {
	t.Parallel()
	for _, opts := range invalidOptions {
		err := opts.Validate()
		if !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("(%+v).Validate() = %v, want ErrInvalid", opts, err)
			continue
		}
		if !goRedisTransport() {
			continue // the nil client below is go-redis's
		}
		// A nil *redis.Client adds its own error: New's error starts with
		// the Options'.
		_, newErr := newClient(t, nil, &opts).TryAcquire(t.Context(), "ok")
		if newErr == nil || len(newErr.Error()) < len(err.Error()) || newErr.Error()[:len(err.Error())] != err.Error() {
			t.Errorf("(%+v).Validate() = %q, want New's error %q", opts, err, newErr)
		}
	}
	for _, opts := range []*fencelock.Options{
		nil,
		{},
		{TTL: fencelock.MinTTL},
		{TTL: fencelock.MaxTTL},
		{TTL: time.Second, RenewInterval: -1, TokenRetention: -1},
		{TTL: time.Second, TokenRetention: time.Second, MinReplicas: 2, ReplicaTimeout: time.Millisecond},
		{TokenRetention: fencelock.MaxTokenRetention},
		{TTL: time.Second, NodeTimeout: time.Second - fencelock.Drift(time.Second) - 1},
		{TTL: time.Second, ReplicaTimeout: time.Second - 1},
		{RenewInterval: fencelock.MinInterval, RetryInterval: fencelock.MinInterval, NodeTimeout: fencelock.MinInterval},
		{Prefix: "app:locks:"},
		{Prefix: "{app}:"},
		{Prefix: "jobs{a}{}:"},
		{Prefix: "jobs}:"},
		{Prefix: "jobs{"},
		{Prefix: "naïve:"},
		{Prefix: strings.Repeat("p", fencelock.MaxNameLen)},
	} {
		if err := opts.Validate(); err != nil {
			t.Errorf("(%+v).Validate() = %v, want nil", opts, err)
		}
	}
}

// Drift is the documented rule, TTL/100 + 2ms, and a lease's Deadline
// keeps it before the TTL runs out.
func TestDrift(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, 12 * time.Millisecond},
		{10 * time.Second, 102 * time.Millisecond},
		{fencelock.MinTTL, 2100 * time.Microsecond},
	} {
		if got := fencelock.Drift(c.ttl); got != c.want {
			t.Errorf("Drift(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
	c := newClient(t, redistest.New(t).Client(t), &fencelock.Options{TTL: 4 * time.Second})
	before := time.Now()
	l, err := c.TryAcquire(t.Context(), "drift")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	after := time.Now()
	defer l.Release(t.Context())
	// The acquisition was sent between before and after.
	valid := 4*time.Second - fencelock.Drift(4*time.Second)
	if d := l.Deadline(); d.Before(before.Add(valid)) || d.After(after.Add(valid)) {
		t.Errorf("Deadline %v, want TTL - Drift (%v) after the acquisition was sent, in [%v, %v]", d, valid, before.Add(valid), after.Add(valid))
	}
}

// Lock names come from callers and, through the CLI, from argv: the name check
// (CheckName) accepts exactly the names whose keys share one hash tag and that the
// fence text form can carry.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"orders:42", "", "a{b}", "tab\t", "naïve", strings.Repeat("x", fencelock.MaxNameLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := fencelock.CheckName(name)
		valid := len(name) >= 1 && len(name) <= fencelock.MaxNameLen && !strings.ContainsAny(name, "{}")
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] > 0x7e {
				valid = false
			}
		}
		if valid != (err == nil) {
			t.Fatalf("CheckName(%q) = %v, want valid=%v", name, err, valid)
		}
		if err != nil && !errors.Is(err, fencelock.ErrInvalid) {
			t.Fatalf("CheckName(%q) = %v, want ErrInvalid", name, err)
		}
	})
}

// New and NewQuorum never panic: a nil client, typed or not, of any kind
// go-redis has, is reported wrapping ErrInvalid by every call, and nothing
// is sent; and so are NewTransport and NewQuorumTransport given the
// transport of a nil client of the other libraries.
func TestNew_nilClients(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	live := redistest.New(t).Client(t)
	var clients map[string]*fencelock.Client
	if goRedisTransport() {
		clients = map[string]*fencelock.Client{
			"nil":                    fencelock.New(nil, nil),
			"(*redis.Client)(nil)":   fencelock.New((*redis.Client)(nil), nil),
			"(*redis.ClusterClient)": fencelock.New((*redis.ClusterClient)(nil), nil),
			"(*redis.Ring)(nil)":     fencelock.New((*redis.Ring)(nil), nil),
			"quorum node nil":        fencelock.NewQuorum([]redis.UniversalClient{live, (*redis.Client)(nil), live}, nil),
			"quorum node untyped":    fencelock.NewQuorum([]redis.UniversalClient{live, nil, live}, nil),
		}
	} else {
		nilConn := rueidisconn.Conn(nil)
		if transportName == "valkey" {
			nilConn = valkeyconn.Conn(nil)
		}
		clients = map[string]*fencelock.Client{
			"nil":                 fencelock.NewTransport(nilConn, nil),
			"quorum node nil":     fencelock.NewQuorumTransport([]transport.Conn{conn(t, live), nilConn, conn(t, live)}, nil),
			"quorum node untyped": fencelock.NewQuorumTransport([]transport.Conn{conn(t, live), nil, conn(t, live)}, nil),
		}
	}
	for name, c := range clients {
		if l, err := c.TryAcquire(ctx, "nil-client"); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("%s: TryAcquire = %v, %v; want ErrInvalid", name, l, err)
		}
		if _, err := c.Semaphore("nil-client", 2).TryAcquire(ctx); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("%s: Semaphore.TryAcquire error = %v, want ErrInvalid", name, err)
		}
		if _, err := c.Election("nil-client").Leader(ctx); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("%s: Leader error = %v, want ErrInvalid", name, err)
		}
		if got := c.WithTTL(time.Minute); got == nil {
			t.Errorf("%s: WithTTL = nil", name)
		}
	}
	if n := live.Exists(ctx, "fencelock:{nil-client}").Val(); n != 0 {
		t.Errorf("a Client with a nil node wrote the lock")
	}
}

// A TokenRetention of a century, the most there is, keeps the counter that
// long: the scripts get an expiry they accept.
func TestOptions_longestRetention(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	l, err := newClient(t, rdb, &fencelock.Options{TokenRetention: fencelock.MaxTokenRetention}).TryAcquire(ctx, "century")
	if err != nil {
		t.Fatalf("TryAcquire with TokenRetention %v: %v", fencelock.MaxTokenRetention, err)
	}
	defer l.Release(ctx)
	if got := rdb.PTTL(ctx, "fencelock:{century}:token").Val(); got < fencelock.MaxTokenRetention {
		t.Errorf("token counter PTTL = %v, want at least %v", got, fencelock.MaxTokenRetention)
	}
}

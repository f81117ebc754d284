package node

import (
	"context"
	"math"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// ParseAcquire reads the acquire script's integer reply, outside input as
// far as the client is concerned: a positive reply is a token and nothing
// else, any other is a holder's remaining TTL, never negative, and never a
// lease. (A reply that is not an integer fails in go-redis: an error,
// which abandons the attempt.)
func FuzzParseAcquire(f *testing.F) {
	f.Add(int64(1764431234567890))
	f.Add(int64(1))
	f.Add(int64(0))
	f.Add(int64(-2500))
	f.Add(int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, reply int64) {
		token, held := ParseAcquire(reply)
		switch {
		case reply > 0 && (token != reply || held != 0):
			t.Fatalf("ParseAcquire(%d) = %d, %v; want the token %d and no wait", reply, token, held, reply)
		case reply <= 0 && (token != 0 || held < 0):
			t.Fatalf("ParseAcquire(%d) = %d, %v; want no token and a wait >= 0", reply, token, held)
		case reply <= 0 && reply > -1<<40 && held != time.Duration(-reply)*time.Millisecond:
			t.Fatalf("ParseAcquire(%d) held = %v, want %dms", reply, held, -reply)
		}
	})
}

// replyError is an error reply, as go-redis makes one, for replies that
// only a Cluster sends.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// The error classes (errclass.go) hold for the replies servers really
// send: a replica's READONLY is cured by a failover (Acquire retries), a
// refused native command (unknown command, syntax error, NOPERM) falls
// back to Lua, and other Redis errors and transport errors are neither.
func TestClassOf(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	replica := redistest.Start(t, &redistest.Options{ReplicaOf: s.Addr()}).Client(t)
	ctx := t.Context()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "noget", "on", ">pw", "~*", "+@all", "-get").Err(); err != nil {
		t.Fatal(err)
	}
	noget := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), Username: "noget", Password: "pw"})
	t.Cleanup(func() { noget.Close() })
	rdb.RPush(ctx, "list", "x")
	for _, tc := range []struct {
		name string
		err  error
		want errClass
	}{
		{"READONLY", replica.Set(ctx, "k", "v", 0).Err(), errCured},
		{"unknown command", rdb.Do(ctx, "DELEXX", "k").Err(), errNativeRefused},
		{"syntax error", rdb.Do(ctx, "SET", "k", "v", "PX", 10, "EX", 10).Err(), errNativeRefused},
		{"NOPERM", noget.Get(ctx, "k").Err(), errNativeRefused},
		{"WRONGTYPE", rdb.Get(ctx, "list").Err(), errOther},
		{"NOSCRIPT", rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err(), errOther},
		{"nil", rdb.Get(ctx, "absent").Err(), errOther},
		{"canceled", context.Canceled, errOther},
		{"timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, errOther},
		{"refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrNotExist}, errOther},
	} {
		if tc.err == nil {
			t.Fatalf("%s: the server returned no error", tc.name)
		}
		if got, _ := classOf(tc.err); got != tc.want {
			t.Errorf("classOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if got, want := nativeRefused(tc.err), tc.want == errNativeRefused; got != want {
			t.Errorf("nativeRefused(%v) = %v, want %v", tc.err, got, want)
		}
	}
	for _, p := range []string{"CLUSTERDOWN The cluster is down", "MOVED 3999 127.0.0.1:6381"} {
		if c, reload := classOf(replyError(p)); c != errCured || !reload {
			t.Errorf("classOf(%q) = %v, %v; want errCured and a slot map reload", p, c, reload)
		}
	}
}

// A request that succeeded is classed on every call (the native release
// asks whether its commands were refused or unexplained), and
// redis.HasErrorPrefix allocates even for a nil error: a success must
// cost no allocation.
func TestClassOf_successAllocatesNothing(t *testing.T) {
	for name, f := range map[string]func(){
		"classOf":       func() { classOf(nil) },
		"nativeRefused": func() { nativeRefused(nil) },
		"unexplained":   func() { unexplained(nil) },
		"wrongType":     func() { wrongType(nil) },
	} {
		if got := testing.AllocsPerRun(100, f); got != 0 {
			t.Errorf("%s(nil): %v allocations, want 0", name, got)
		}
	}
	if got, want := classOf(nil); got != errOther || want {
		t.Errorf("classOf(nil) = %v, %v; want errOther, no reload", got, want)
	}
	if unexplained(nil) || wrongType(nil) || nativeRefused(nil) {
		t.Error("a nil error is refused, unexplained or a wrong type, want none")
	}
}

package fencelock

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

// parseAcquire reads the acquire script's integer reply, outside input as
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
		token, held := parseAcquire(reply)
		switch {
		case reply > 0 && (token != reply || held != 0):
			t.Fatalf("parseAcquire(%d) = %d, %v; want the token %d and no wait", reply, token, held, reply)
		case reply <= 0 && (token != 0 || held < 0):
			t.Fatalf("parseAcquire(%d) = %d, %v; want no token and a wait >= 0", reply, token, held)
		case reply <= 0 && reply > -1<<40 && held != time.Duration(-reply)*time.Millisecond:
			t.Fatalf("parseAcquire(%d) held = %v, want %dms", reply, held, -reply)
		}
	})
}

// The errors that make a native command fall back to Lua are those a
// server really sends: unknown command, syntax error and NOPERM; Redis
// errors of other kinds, and transport errors, are not.
func TestClient_nativeFallbackErrors(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
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
		want bool
	}{
		{"unknown command", rdb.Do(ctx, "DELEXX", "k").Err(), true},
		{"syntax error", rdb.Do(ctx, "SET", "k", "v", "PX", 10, "EX", 10).Err(), true},
		{"NOPERM", noget.Get(ctx, "k").Err(), true},
		{"WRONGTYPE", rdb.Get(ctx, "list").Err(), false},
		{"nil", rdb.Get(ctx, "absent").Err(), false},
		{"canceled", context.Canceled, false},
		{"timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
	} {
		if tc.err == nil {
			t.Fatalf("%s: the server returned no error", tc.name)
		}
		if got := unsupported(tc.err); got != tc.want {
			t.Errorf("unsupported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

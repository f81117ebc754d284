package fencelock

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// parseAcquire reads a script reply, outside input as far as the client
// is concerned: anything but {1, token > 0} or {0, pttl} is an error,
// never a lease.
func FuzzParseAcquire(f *testing.F) {
	f.Add(int64(1), int64(1764431234567890), uint8(2), false)
	f.Add(int64(0), int64(-2), uint8(2), false)
	f.Add(int64(1), int64(0), uint8(2), false)
	f.Add(int64(2), int64(5), uint8(3), true)
	f.Fuzz(func(t *testing.T, code, v int64, n uint8, asString bool) {
		reply := make([]any, n%4)
		for i := range reply {
			switch {
			case asString:
				reply[i] = "1"
			case i == 0:
				reply[i] = code
			default:
				reply[i] = v
			}
		}
		token, held, err := parseAcquire(reply)
		valid := len(reply) == 2 && !asString && (code == 1 && v > 0 || code == 0)
		switch {
		case !valid && err == nil:
			t.Fatalf("parseAcquire(%v) = %d, %v, nil; want an error", reply, token, held)
		case valid && err != nil:
			t.Fatalf("parseAcquire(%v) error = %v, want nil", reply, err)
		case valid && code == 1 && token != v:
			t.Fatalf("parseAcquire(%v) token = %d, want %d", reply, token, v)
		case valid && code == 0 && (token != 0 || held != time.Duration(v)*time.Millisecond):
			t.Fatalf("parseAcquire(%v) = %d, %v; want 0, %vms", reply, token, held, v)
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
	noget := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "noget", Password: "pw"})
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

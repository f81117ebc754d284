package fencelock

import (
	"testing"
	"time"
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

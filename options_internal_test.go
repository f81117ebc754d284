package fencelock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Lock names come from callers and, through the CLI, from argv: checkName
// accepts exactly the names whose keys share one hash tag and that the
// fence text form can carry.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"orders:42", "", "a{b}", "tab\t", "naïve", strings.Repeat("x", MaxNameLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := checkName(name)
		valid := len(name) >= 1 && len(name) <= MaxNameLen && !strings.ContainsAny(name, "{}")
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 || name[i] > 0x7e {
				valid = false
			}
		}
		if valid != (err == nil) {
			t.Fatalf("checkName(%q) = %v, want valid=%v", name, err, valid)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("checkName(%q) = %v, want ErrInvalid", name, err)
		}
	})
}

// A quorum node's request timeout is small against the TTL by default,
// and leaves room for WAIT with MinReplicas.
func TestOptions_nodeTimeoutDefault(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want time.Duration
	}{
		{Options{TTL: time.Second}, 100 * time.Millisecond},
		{Options{}, 500 * time.Millisecond},
		{Options{TTL: time.Minute}, 500 * time.Millisecond},
		{Options{TTL: time.Minute, MinReplicas: 1}, 1500 * time.Millisecond},
		{Options{TTL: time.Minute, NodeTimeout: 3 * time.Second}, 3 * time.Second},
	} {
		cfg, err := tc.opts.config()
		if err != nil || cfg.nodeTimeout != tc.want {
			t.Errorf("Options %+v: nodeTimeout = %v, %v; want %v, nil", tc.opts, cfg.nodeTimeout, err, tc.want)
		}
	}
}

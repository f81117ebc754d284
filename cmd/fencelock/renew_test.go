package main

import (
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

func TestRenew_lost(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	vars := acquireVars(t, s, "gone")
	rdb.Del(t.Context(), "fencelock:{gone}")
	h := newHarness(t)
	h.env = vars
	if code := h.run("renew", "--redis", redisURL(s)); code != exitLeaseLost {
		t.Errorf("renew of a deleted lock: exit = %d, want %d", code, exitLeaseLost)
	}
	if !strings.Contains(h.stderr.String(), "lease lost") {
		t.Errorf("renew stderr = %q, want the cause", h.stderr)
	}
}

package fencelock_test

import (
	"slices"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// Release and renew use DELEX / DELIFEQ / SET IFEQ where COMMAND INFO finds
// them, and the Lua scripts elsewhere (Redis 7.0, what CI has).
func TestClient_nativeCommands(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	info, err := rdb.Do(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil {
		t.Fatal(err)
	}
	delex, delifeq := info[0] != nil, info[1] != nil

	rec := &recorder{}
	rdb.AddHook(rec)
	c := fencelock.New(rdb, &fencelock.Options{RenewInterval: -1})
	l, err := c.TryAcquire(ctx, "native")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, names := rec.reset()

	t.Run("lua", func(t *testing.T) {
		if delex || delifeq {
			t.Skip("server has native compare-and-delete")
		}
		if slices.Contains(names, "delex") || slices.Contains(names, "delifeq") {
			t.Errorf("commands %v use a native command the server lacks", names)
		}
	})
	t.Run("native", func(t *testing.T) {
		if !delex && !delifeq {
			t.Skip("server has neither DELEX (Redis 8.4+) nor DELIFEQ (Valkey 9+)")
		}
		want := "delifeq"
		if delex {
			want = "delex"
		}
		if !slices.Contains(names, want) || !slices.Contains(names, "set") {
			t.Errorf("commands %v, want %s for release and SET IFEQ for renew", names, want)
		}
	})
}

package dbtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

// Every fenced access of a Store with hooks is reported once: the
// fence.Store methods, and Tx, the main way to fence SQL writes, whose
// stale refusals fenceprom's FencelockStaleRejections alert counts.
func TestStore_WithHooks(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			fencetest.RunHooks(t, func(t *testing.T, h *fence.Hooks) fence.Store {
				s, _ := newStore(t, db, d.dialect)
				return s.WithHooks(h)
			})

			var rec fencetest.Recorder
			plain, _ := newTxStore(t, db, d.dialect)
			s := plain.WithHooks(rec.Hooks())
			ctx := fencetest.WithMark(t.Context(), "tx")
			f9, f10, f11 := fence.Fence{Lock: "orders", Token: 9, Lease: "a"}, fence.Fence{Lock: "orders", Token: 10, Lease: "b"}, fence.Fence{Lock: "orders", Token: 11, Lease: "c"}
			nothing := func(context.Context, *sql.Tx) error { return nil }
			boom := errors.New("boom")
			s.Tx(ctx, "r", f10, nothing)
			s.Tx(ctx, "r", f9, nothing)
			s.Tx(ctx, "r", fence.Fence{Lock: "orders", Token: 9, Lease: "a"}, nothing)
			s.Tx(ctx, "r", f11, func(context.Context, *sql.Tx) error { return boom })
			s.Tx(ctx, "r", fence.Fence{Lock: "", Token: 12, Lease: "d"}, nothing)
			func() {
				defer func() { recover() }()
				s.Tx(ctx, "r", f11, func(context.Context, *sql.Tx) error { panic("fn panicked") })
			}()
			plain.Tx(ctx, "r", f11, nothing) // the Store it came from reports nothing
			reports := rec.Reports()
			fencetest.CheckReports(t, reports, ctx, "r",
				fencetest.Want{Kind: "accepted", Op: "tx", Fence: f10},
				fencetest.Want{Kind: "stale", Op: "tx", Fence: f9, Current: f10},
				fencetest.Want{Kind: "stale", Op: "tx", Fence: f9, Current: f10},
				fencetest.Want{Kind: "failed", Op: "tx", Fence: f11, Err: boom},
				fencetest.Want{Kind: "failed", Op: "tx", Fence: fence.Fence{Lock: "", Token: 12, Lease: "d"}, Err: fence.ErrInvalid},
				fencetest.Want{Kind: "failed", Op: "tx", Fence: f11},
			)
			if len(reports) == 6 && !strings.Contains(fmt.Sprint(reports[5].Info.Err), "did not return") {
				t.Errorf("report of a Tx whose fn panicked: error %v, want one saying fn did not return", reports[5].Info.Err)
			}
			if s.WithHooks(nil) == nil {
				t.Errorf("WithHooks(nil) = nil, want a Store")
			}
		})
	}
}

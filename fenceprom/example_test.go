package fenceprom_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fenceprom"
	"github.com/prometheus/client_golang/prometheus"
)

// A store observed by a Collector counts accepted and stale accesses. The
// lock side is wired the same way: fencelock.Options{Hooks: m.Hooks()}.
func Example() {
	m := fenceprom.New(nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	store := fence.WithHooks(&fence.Memory{}, m.FenceHooks())
	ctx := context.Background()
	store.Put(ctx, "report", fence.Fence{Lock: "nightly", Token: 2, Lease: "new"}, []byte("v2"))
	err := store.Put(ctx, "report", fence.Fence{Lock: "nightly", Token: 1, Lease: "old"}, []byte("v1"))
	fmt.Println("stale:", errors.Is(err, fence.ErrStale))

	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != "fencelock_fence_accesses_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if s.GetCounter().GetValue() == 0 {
				continue // every series exists from New on, at 0
			}
			fmt.Print(f.GetName(), "{")
			for i, l := range s.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", s.GetCounter().GetValue())
		}
	}
	// Output:
	// stale: true
	// fencelock_fence_accesses_total{op="put",result="accepted"} 1
	// fencelock_fence_accesses_total{op="put",result="stale"} 1
}

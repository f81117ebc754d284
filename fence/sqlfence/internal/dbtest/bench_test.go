package dbtest_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
)

func BenchmarkPut(b *testing.B) {
	for _, d := range databases {
		b.Run(d.name, func(b *testing.B) {
			s, _ := newStore(b, d.open(b), d.dialect)
			value := []byte("some value of modest size")
			b.ReportAllocs()
			var token int64
			for b.Loop() {
				token++
				if err := s.Put(b.Context(), "orders:42", fence.Fence{Lock: "orders", Token: token, Lease: "k3J9x"}, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package transport_test

import (
	"sync"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
)

// A Read in flight when the Tracker closes (an invalidation's handler
// reading the key as Close runs) shares the connection with the close:
// one at a time, and a Read after it fails. Run with -race.
func TestGoRedisTracker_readWhileClosing(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	for range 20 {
		tr, err := transport.GoRedis(rdb).Track(t.Context(), func([]string) {})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					if _, _, err := tr.Read(t.Context(), "k"); err != nil {
						return
					}
					select {
					case <-tr.Done():
						return
					default:
					}
				}
			})
		}
		tr.Close()
		wg.Wait()
		if _, _, err := tr.Read(t.Context(), "k"); err == nil {
			t.Fatal("Read after Close = nil error, want the tracker closed")
		}
	}
}

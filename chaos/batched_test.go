package chaos_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLostReplyBatched is TestLostReply with every holder but the first
// on one Client: their acquisitions, releases and renewals go in batches,
// and a dropped reply is a whole batch's. Each caller must still release
// what its lost acquisition took.
func TestLostReplyBatched(t *testing.T) {
	skipOnTransport(t, skipHooked)
	runScenario(t, lostReplyScenario("lost-reply-batched", nil, true))
}

// TestServerPauseBatched is TestServerPause with every holder on one
// Client, so that their calls go in batches while the server is stopped
// (SIGSTOP) with a batch in flight.
func TestServerPauseBatched(t *testing.T) {
	runScenario(t, scenario{name: "server-pause-batched", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		srv := redistest.New(t)
		rdb := redis.NewClient(redisOptions(srv.Addr()))
		t.Cleanup(func() { rdb.Close() })
		c := lockClient(t, rdb)
		s := &standalone{srv: srv}
		for range holderCount {
			s.clients = append(s.clients, c)
		}
		return s.world(memoryResource, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 1.5, 3) },
			inject:   func(t *testing.T, v int) { s.srv.Pause(t) },
			heal:     func(t *testing.T, v int) { s.srv.Resume(t) },
		})
	}})
}

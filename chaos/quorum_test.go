package chaos_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestQuorumNodeLoss runs quorum locks (NewQuorum over three independent
// masters) while, as a holder computes, one node crashes and restarts
// without its data and then another: the holder's lease is left on a
// minority of nodes, and another holder takes a majority.
func TestQuorumNodeLoss(t *testing.T) {
	runScenario(t, scenario{name: "quorum-node-loss", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		var nodes []*redistest.Server
		for range 3 {
			nodes = append(nodes, redistest.New(t))
		}
		var clients []*fencelock.Client
		for range holderCount {
			var rdbs []redis.UniversalClient
			for _, n := range nodes {
				rdb := redis.NewClient(redisOptions(n.Addr()))
				t.Cleanup(func() { rdb.Close() })
				rdbs = append(rdbs, rdb)
			}
			clients = append(clients, newQuorumLock(t, rdbs, lockOptions()))
		}
		var first int
		f := fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { first = r.IntN(3); return between(r, 1, 2) },
			inject:   func(t *testing.T, v int) { nodes[first].Restart(t, false) },
			heal:     func(t *testing.T, v int) { nodes[(first+1)%3].Restart(t, false) },
		}
		return &world{
			lock:     func(i int) *fencelock.Client { return clients[i] },
			resource: memoryResource,
			holders:  goroutineHolders,
			nemesis:  targeted(f),
		}
	}})
}

package chaos_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// longHoldRetention is the long-hold scenario's TokenRetention: short,
// so that a hold of a few TTLs outlives it several times. Not the TTL,
// which Options allows: with the counter ahead of the clock, any 50 ms in
// which nobody used the lock after its expiry (a waiter's timer late on a
// loaded machine) would lapse it and send tokens back, as documented; one
// unfenced run in 200 did.
const longHoldRetention = 2 * ttl

// counterLead is how far ahead of the server's clock each run's token
// counter starts, as after a clock that ran ahead and was corrected: the
// clock floor is then below every token issued, and only the counter
// keeps tokens increasing.
const counterLead = time.Minute

// TestLongHold holds leases for many times TokenRetention while the
// other holders contend: the victim, having read the counter, keeps its
// lease (its keeper renews) for 8–14 TTLs (4–7 retentions), then its
// connection to the lock Redis is frozen for 2–4 TTLs so that its lease expires, another holder
// takes the lock and writes, and the victim writes last with its old
// fence. Each run's counter starts a minute ahead of the server's clock,
// so a counter that lapsed during the hold (renewals that did not refresh
// its retention, issue 11.1) would make the next token smaller than the
// held one: issued-order, and the resource would take the stale write.
func TestLongHold(t *testing.T) {
	runScenario(t, scenario{name: "long-hold", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		srv := redistest.New(t)
		admin := srv.Client(t)
		opts := lockOptions()
		opts.TokenRetention = longHoldRetention
		var proxies []*redistest.Proxy
		var clients []*fencelock.Client
		for range holderCount {
			p := redistest.NewProxy(t, srv.Addr())
			rdb := redis.NewClient(redisOptions(p.Addr()))
			t.Cleanup(func() { rdb.Close() })
			proxies = append(proxies, p)
			clients = append(clients, newLock(t, rdb, opts))
		}
		return &world{
			lock: func(i int) *fencelock.Client { return clients[i] },
			// In the test goroutine, just before the holders start.
			resource: func(r *run) (*chaos.Journal, func(int) fence.Store) {
				aheadCounter(r, admin)
				return memoryResource(r)
			},
			holders: goroutineHolders,
			nemesis: longHold(proxies),
		}
	}})
}

// aheadCounter sets the run's token counter counterLead ahead of the
// server's clock, with the expiry an acquisition would give it.
func aheadCounter(r *run, admin *redis.Client) {
	ctx := context.Background()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		r.t.Fatalf("TIME: %v", err)
	}
	token := now.Add(counterLead).UnixMicro()
	key := "fencelock:{" + r.name + "}:token"
	if err := admin.Set(ctx, key, strconv.FormatInt(token, 10), longHoldRetention+ttl).Err(); err != nil {
		r.t.Fatalf("SET %s: %v", key, err)
	}
}

// longHold is TestLongHold's nemesis: for runFor, it takes a holder that
// has just read the counter (with probability 3/4, one at a time), lets
// it hold its lease for 8–14 TTLs, partitions it from the lock Redis for
// 2–4 TTLs, then heals and lets it write.
func longHold(proxies []*redistest.Proxy) func(r *run) {
	return func(r *run) {
		end := time.NewTimer(runFor)
		defer end.Stop()
		var (
			phase  <-chan time.Time
			victim = -1
			cut    bool
			stall  chan struct{}
		)
		healNow := func() {
			if cut {
				proxies[victim].Heal()
			}
			if stall != nil {
				close(stall)
			}
			victim, cut, stall, phase = -1, false, nil, nil
		}
		defer healNow()
		for {
			select {
			case <-end.C:
				return
			case <-phase:
				if !cut {
					proxies[victim].Partition()
					cut = true
					phase = time.After(between(r.rand, 2, 4))
					continue
				}
				healNow()
			case ev := <-r.reads:
				if victim >= 0 || r.rand.IntN(4) == 0 {
					ev.reply <- nil
					continue
				}
				victim, stall = ev.client, make(chan struct{})
				ev.reply <- stall
				r.faults++
				phase = time.After(between(r.rand, 8, 14))
			}
		}
	}
}

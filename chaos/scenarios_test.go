package chaos_test

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestHolderPause pauses a holder in its critical section past its TTL:
// the holder stops before its write, and its connection to the lock Redis
// is frozen (bytes held by the proxy), as the whole process would be. Its
// lease expires, another holder takes the lock and writes, and the paused
// holder then writes with its old fence.
func TestHolderPause(t *testing.T) {
	runScenario(t, scenario{name: "holder-pause", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		return s.world(memoryResource, holderPause(s))
	}})
}

// holderPause is TestHolderPause's fault: the victim stalls after its
// read for 2–4 TTLs while its connection to the lock Redis is frozen.
func holderPause(s *standalone) fault {
	return fault{
		stall:  true,
		hold:   func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
		inject: func(t *testing.T, v int) { s.proxies[v].Partition() },
		heal:   func(t *testing.T, v int) { s.proxies[v].Heal() },
	}
}

// TestPartition partitions a holder from the lock Redis while it computes
// for longer than the TTL: its renewals cannot arrive, its lease expires,
// and another holder writes before it does. The resource stays reachable.
func TestPartition(t *testing.T) {
	runScenario(t, scenario{name: "partition", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		return s.world(memoryResource, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 1.5, 3) },
			inject:   func(t *testing.T, v int) { s.proxies[v].Partition() },
			heal:     func(t *testing.T, v int) { s.proxies[v].Heal() },
		})
	}})
}

// TestDelayedRequest delays a holder's requests to the resource (proxy
// latency) beyond its operation timeout: its write times out, it releases
// the lock, a newer holder reads and writes, and the delayed write then
// arrives at the resource.
func TestDelayedRequest(t *testing.T) {
	runScenario(t, scenario{name: "delayed-request", adapter: "http", shortRuns: 3, control: lateRequest, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		hr := newHTTPResource(t, true)
		return s.world(hr.resource, fault{
			shortOnly: true,
			hold:      func(r *rand.Rand) time.Duration { return between(r, 1, 1.5) },
			inject:    func(t *testing.T, v int) { hr.proxies[v].SetLatency(6 * ttl) },
			heal:      func(t *testing.T, v int) { hr.proxies[v].SetLatency(0) },
		})
	}})
}

// TestServerPause stops the lock Redis (SIGSTOP) for longer than the TTL
// while a holder computes: when it continues, the lock has expired, the
// holder's renewal fails, and a waiter takes the lock.
func TestServerPause(t *testing.T) {
	runScenario(t, scenario{name: "server-pause", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		return s.world(memoryResource, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 1.5, 3) },
			inject:   func(t *testing.T, v int) { s.srv.Pause(t) },
			heal:     func(t *testing.T, v int) { s.srv.Resume(t) },
		})
	}})
}

// TestRestart restarts the lock Redis without persistence while a holder
// computes: the lock and the token counter are gone, a waiter takes the
// lock at once, and its token comes from the clock floor.
func TestRestart(t *testing.T) {
	runScenario(t, scenario{name: "restart", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		return s.world(memoryResource, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 2, 4) },
			inject:   func(t *testing.T, v int) { s.srv.Restart(t, false) },
		})
	}})
}

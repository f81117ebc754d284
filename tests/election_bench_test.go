package tests

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The election benchmarks measure handover latency: each op is one
// handover between two candidates on Clients of their own (as in two
// processes), and the latency percentiles are reported as metrics (ns/op
// also counts setting up each handover). Run with at least 100
// handovers: go test -run '^$' -bench Election -benchtime 200x .

// benchCandidate is a candidate whose Campaign attempts are counted, so
// that a handover starts only once the other candidate waits for it.
type benchCandidate struct {
	e *fencelock.Election
	p probe
}

func newBenchCandidate(t testing.TB, rdb redis.UniversalClient, opts fencelock.Options) *benchCandidate {
	c := &benchCandidate{}
	c.e = newClient(t, rdb, c.p.options(opts)).Election("bench")
	return c
}

// waiting starts c's Campaign and returns once c waits for the lock.
func (c *benchCandidate) waiting(b *testing.B, ctx context.Context) <-chan campaignResult {
	for len(c.p.held) > 0 {
		<-c.p.held
	}
	done := campaigned(ctx, c.e, "bench")
	c.p.waiting(b, ctx)
	return done
}

// reportPercentiles reports the 50th and 99th percentiles of ds, in ms.
func reportPercentiles(b *testing.B, prefix string, ds []time.Duration) {
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return float64(ds[max(i, 0)]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), prefix+"p50-ms")
	b.ReportMetric(at(0.99), prefix+"p99-ms")
}

// BenchmarkElection_handoverResign: from the leader's Resign to the
// waiting candidate's Campaign returning. The TTL and the fallback retry
// are a minute: only the resignation's wake-up can hand over.
func BenchmarkElection_handoverResign(b *testing.B) {
	srv := redistest.New(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	opts := fencelock.Options{TTL: time.Minute, RetryInterval: time.Minute}
	cands := []*benchCandidate{newBenchCandidate(b, srv.Client(b), opts), newBenchCandidate(b, srv.Client(b), opts)}
	if _, err := cands[0].e.Campaign(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	i := 0
	for b.Loop() {
		leader, next := cands[i%2], cands[(i+1)%2]
		done := next.waiting(b, ctx)
		start := time.Now()
		if err := leader.e.Resign(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			b.Fatal(r.err)
		}
		ds = append(ds, r.at.Sub(start))
		i++
	}
	reportPercentiles(b, "", ds)
}

// BenchmarkElection_handoverCrash: a leader whose connection is cut (as
// if its process had crashed: its renewals never arrive) is replaced by
// the waiting candidate once its lock expires. Reported: from the crash
// to the new leader's Campaign returning (bounded by the TTL, 200ms,
// since the last renewal), and from the crashed lock's expiry (its
// lease's Deadline plus the drift allowance) to the same.
func BenchmarkElection_handoverCrash(b *testing.B) {
	srv := redistest.New(b)
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	const ttl = 200 * time.Millisecond
	drift := ttl/100 + 2*time.Millisecond // Options.TTL's documented allowance
	opts := fencelock.Options{TTL: ttl, RetryInterval: time.Minute}
	var cands []*benchCandidate
	var proxies []*redistest.Proxy
	for range 2 {
		p := redistest.NewProxy(b, srv.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		b.Cleanup(func() { rdb.Close() })
		proxies = append(proxies, p)
		cands = append(cands, newBenchCandidate(b, rdb, opts))
	}
	l, err := cands[0].e.Campaign(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var fromCrash, fromExpiry []time.Duration
	i := 0
	for b.Loop() {
		leader, next := i%2, (i+1)%2
		done := cands[next].waiting(b, ctx)
		crash := time.Now()
		proxies[leader].Partition()
		r := <-done
		if r.err != nil {
			b.Fatal(r.err)
		}
		// The crashed lease's last deadline stands: no renewal got through.
		expired := l.Deadline().Add(drift)
		fromCrash = append(fromCrash, r.at.Sub(crash))
		fromExpiry = append(fromExpiry, r.at.Sub(expired))
		// The crashed candidate comes back for the next round.
		proxies[leader].Reset()
		proxies[leader].Heal()
		<-l.Context().Done()
		l = r.l
		i++
	}
	reportPercentiles(b, "crash-", fromCrash)
	reportPercentiles(b, "expiry-", fromExpiry)
}

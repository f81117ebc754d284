package chaos_test

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestResourceStall stalls the resource itself between its fence check
// and its write: the handler behind httpfence.Middleware, once the
// middleware admitted a holder's write of the counter, waits 4–6 TTLs
// before performing it (a slow disk, a pause of the resource's process)
// and then performs it, though the holder gave up on it meanwhile. The
// holder's write times out, it releases, and another holder takes the
// lock: the middleware must keep the resource to itself until the stalled
// write is done, or that holder's read and write land first and the old
// write lands last. Every other fault is TestHolderPause's (the holder
// stalls after its read, its lock connection frozen), which gives the
// fenced runs their stale rejections and the unfenced ones stale writes.
func TestResourceStall(t *testing.T) {
	runScenario(t, scenario{name: "resource-stall", adapter: "http", shortRuns: 3, control: lateRequest, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		hr := newHTTPResource(t, false)
		rs := &resourceStall{armed: map[string]chan struct{}{}, taken: map[chan struct{}]bool{}}
		hr.stall = rs.take
		w := s.world(hr.resource, fault{})
		w.nemesis = rs.nemesis(s)
		return w
	}})
}

// resourceStall holds the stalls armed for the holders' next writes.
type resourceStall struct {
	mu    sync.Mutex
	armed map[string]chan struct{} // by run and client
	taken map[chan struct{}]bool
}

func stallKey(r *run, client int) string { return r.name + "/" + strconv.Itoa(client) }

// take is the handler's question: the stall armed for client's write, if
// any, taken once.
func (rs *resourceStall) take(r *run, client int) <-chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ch := rs.armed[stallKey(r, client)]
	if ch != nil {
		delete(rs.armed, stallKey(r, client))
		rs.taken[ch] = true
	}
	return ch
}

func (rs *resourceStall) arm(r *run, client int) chan struct{} {
	ch := make(chan struct{})
	rs.mu.Lock()
	rs.armed[stallKey(r, client)] = ch
	rs.mu.Unlock()
	return ch
}

// heal ends a stall; it reports whether a write was stalled by it.
func (rs *resourceStall) heal(r *run, client int, ch chan struct{}) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.armed[stallKey(r, client)] == ch {
		delete(rs.armed, stallKey(r, client))
	}
	taken := rs.taken[ch]
	delete(rs.taken, ch)
	close(ch)
	return taken
}

// nemesis is TestResourceStall's: for runFor, it aims a fault at a holder
// that has just read the counter (with probability 3/4, one at a time):
// the first holder about to write within the TTL gets a stall of its
// write at the resource, healed after 4–6 TTLs (counted only if the
// write was stalled); every other victim a pause, healed after 2–4 TTLs,
// so that the fenced run sees stale rejections. Everything is healed at
// the end.
func (rs *resourceStall) nemesis(s *standalone) func(r *run) {
	pause := holderPause(s)
	return func(r *run) {
		var stalled bool
		aimAtReads(r, nil, func(ev readEvent) (<-chan struct{}, time.Duration, func()) {
			v := ev.client
			if ev.compute < ttl && !stalled {
				stalled = true
				ch := rs.arm(r, v)
				return nil, between(r.rand, 4, 6), func() {
					if rs.heal(r, v, ch) {
						r.faults++
					}
				}
			}
			pause.inject(r.t, v)
			stall := make(chan struct{})
			r.faults++
			return stall, pause.hold(r.rand), func() {
				pause.heal(r.t, v)
				close(stall)
			}
		})
	}
}

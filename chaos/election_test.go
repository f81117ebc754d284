package chaos_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
)

// TestElectionPause runs the holders as candidates of a leader election
// (fencelock.Election): each leads for one to three read-compute-write
// cycles, fenced by its term, then resigns. The fault is TestHolderPause's:
// a leader stalls after its read for 2–4 TTLs while its connection to the
// lock Redis is frozen, another candidate takes over, and the paused
// leader then writes with its old term.
func TestElectionPause(t *testing.T) {
	runScenario(t, scenario{name: "election-pause", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		return electionWorld(s, holderPause(s))
	}})
}

// TestElectionPartition partitions a leader from the lock Redis while it
// computes for longer than the TTL: its renewals cannot arrive, its
// leadership expires, and the next leader writes before it does. The
// resource stays reachable.
func TestElectionPartition(t *testing.T) {
	runScenario(t, scenario{name: "election-partition", adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		return electionWorld(s, fault{
			longOnly: true,
			hold:     func(r *rand.Rand) time.Duration { return between(r, 1.5, 3) },
			inject:   func(t *testing.T, v int) { s.proxies[v].Partition() },
			heal:     func(t *testing.T, v int) { s.proxies[v].Heal() },
		})
	}})
}

// electionWorld is s's world with candidates for holders.
func electionWorld(s *standalone, f fault) *world {
	return &world{
		lock:     func(i int) *fencelock.Client { return s.clients[i] },
		resource: memoryResource,
		holders:  candidates,
		nemesis:  targeted(f),
	}
}

// candidates runs holderCount candidates for the run's election (named
// as the run's lock) until stop is closed.
func candidates(r *run, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range holderCount {
		c := &candidate{
			id:   i,
			e:    r.w.lock(i).Election(r.name),
			r:    r,
			rand: rand.New(rand.NewPCG(r.seed, uint64(i)+1)),
		}
		wg.Go(func() { c.run(ctx) })
	}
	<-stop
	cancel()
	wg.Wait()
}

// candidate is chaos.Holder's loop for an election: campaign, then, while
// it believes it leads, one to three cycles of fenced read of the counter
// → compute → fenced write of the counter + 1 (now and then a fenced put,
// get or delete of the note), then resign. Like Holder it never looks at
// its leadership's Context before writing: only the resource's check of
// the term can stop a deposed leader.
type candidate struct {
	id   int
	e    *fencelock.Election
	r    *run
	rand *rand.Rand
	seq  int64
}

func (c *candidate) run(ctx context.Context) {
	for ctx.Err() == nil {
		if !c.term(ctx) {
			pause(ctx, ttl/4) // the election could not be had (the network)
		}
	}
}

// term campaigns and leads one term; it reports whether it led.
func (c *candidate) term(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, 20*ttl)
	call := time.Now().UnixNano()
	l, err := c.e.Campaign(cctx, "candidate-"+strconv.Itoa(c.id))
	ret := time.Now().UnixNano()
	cancel()
	if err != nil {
		return false
	}
	c.r.rec.Lease(chaos.Acquisition{Client: c.id, Token: l.Token(), Lease: l.ID(), Call: call, Return: ret})
	f := l.Fence()
	// Operations outlive the run's end by at most opTimeout, so that the
	// last term's results are known.
	opctx := context.WithoutCancel(ctx)
	for range 1 + c.rand.IntN(3) {
		v, got := c.op(opctx, chaos.Input{Resource: chaos.Counter, Op: chaos.OpGet, Fence: f})
		if got.Result != chaos.ResultOK {
			break
		}
		compute := time.Duration(c.rand.Int64N(int64(ttl/10) + 1))
		if c.rand.IntN(4) == 0 {
			compute = 4*ttl + time.Duration(c.rand.Int64N(int64(2*ttl)))
		}
		stall := c.r.afterRead(c.id, f, compute)
		pause(ctx, compute)
		if stall != nil {
			<-stall
		}
		count, _ := chaos.ParseCount(v)
		c.op(opctx, chaos.Input{Resource: chaos.Counter, Op: chaos.OpPut, Fence: f, Value: c.value(count + 1)})
		if ctx.Err() != nil {
			break
		}
	}
	switch c.rand.IntN(6) {
	case 0:
		c.op(opctx, chaos.Input{Resource: chaos.Note, Op: chaos.OpPut, Fence: f, Value: c.value(0)})
	case 1:
		c.op(opctx, chaos.Input{Resource: chaos.Note, Op: chaos.OpDelete, Fence: f})
	case 2:
		c.op(opctx, chaos.Input{Resource: chaos.Note, Op: chaos.OpGet, Fence: f})
	}
	rctx, cancel := context.WithTimeout(opctx, opTimeout)
	c.e.Resign(rctx) // a lost leadership is expected here; the resource decides
	cancel()
	return true
}

// value returns a unique value that carries the counter, as Holder's do.
func (c *candidate) value(count int64) string {
	return strconv.FormatInt(count, 10) + "/" + strconv.Itoa(c.id) + "." + strconv.FormatInt(c.seq, 10)
}

// op performs and records one fenced operation, as Holder's op does.
func (c *candidate) op(ctx context.Context, in chaos.Input) ([]byte, chaos.Output) {
	c.seq++
	id := int64(c.id)<<40 | c.seq
	ctx, cancel := context.WithTimeout(chaos.WithOp(ctx, c.id, id), opTimeout)
	defer cancel()
	store := c.r.view(c.id)
	op := chaos.Op{ID: id, Client: c.id, Input: in, Call: time.Now().UnixNano()}
	var v []byte
	var err error
	switch in.Op {
	case chaos.OpGet:
		v, err = store.Get(ctx, in.Resource, in.Fence)
	case chaos.OpPut:
		err = store.Put(ctx, in.Resource, in.Fence, []byte(in.Value))
	case chaos.OpDelete:
		err = store.Delete(ctx, in.Resource, in.Fence)
	}
	op.Return = time.Now().UnixNano()
	switch {
	case errors.Is(err, fence.ErrStale):
		op.Output = chaos.Output{Result: chaos.ResultStale}
	case err != nil:
		op.Output = chaos.Output{Result: chaos.ResultUnknown}
		op.Err = err.Error()
	case in.Op == chaos.OpGet:
		op.Output = chaos.Output{Result: chaos.ResultOK, Value: string(v), Present: v != nil}
	default:
		op.Output = chaos.Output{Result: chaos.ResultOK}
	}
	c.r.rec.Op(op)
	return v, op.Output
}

// pause waits for d or until ctx ends: a computation, not a
// synchronisation.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

package quorum

import (
	"math"
	"slices"
	"time"

	"github.com/fencelock/fencelock/internal/node"
)

// Held is what a majority of nodes says of who holds a lock.
type Held struct {
	LeaseID string
	// Token is the greatest token a majority of the counters reach.
	Token int64
	// TTL is how long the lock stays on a majority of the nodes unless
	// renewed; negative if it has no expiry there.
	TTL time.Duration
	// Delay is, when no lease holds the lock, how long lock-delays keep
	// it from a majority of the nodes (0: they do not), and LeaseID the
	// lease that left them.
	Delay time.Duration
}

// Holder returns the lease that a majority of views agree holds the
// lock (MajorityYes), or MajorityNo when no lease can have a majority, or
// Undecided while views in error leave it open. A single node's view
// decides alone.
//
// The token is the greatest that a majority of the nodes' counters reach
// (the majority-th greatest counter): the holder's when every node
// answers, since its token was written to a majority and only a minority
// can have issued a greater one since; with nodes down it can be lower,
// never greater. The TTL is the majority-th longest of the holder's, no
// expiry counting as the longest.
//
// When no lease holds the lock (MajorityNo), Held says whether the
// lock-delays of a lease that expired keep it from a majority, for how
// long (Delay), and which lease left them.
func Holder(views []node.View) (Held, Decision) {
	winner, t := Vote(len(views), func(i int) (string, bool, error) {
		v := views[i]
		return v.LeaseID, v.Held, v.Err
	})
	d := t.Decide(len(views), Keeping)
	switch {
	case d == Undecided:
		return Held{}, d
	case d == MajorityNo:
		delay, kept := delayed(views)
		if !kept {
			return Held{}, d
		}
		by, _ := Vote(len(views), func(i int) (string, bool, error) {
			v := views[i]
			return v.DelayedBy, v.DelayedBy != "", v.Err
		})
		return Held{LeaseID: by, Token: counter(views), Delay: max(delay, time.Millisecond)}, d
	}
	maj := Majority(len(views))
	var ttls []time.Duration
	for _, v := range views {
		if v.Err == nil && v.Held && v.LeaseID == winner {
			ttl := v.TTL
			if ttl < 0 {
				ttl = math.MaxInt64
			}
			ttls = append(ttls, ttl)
		}
	}
	slices.Sort(ttls)
	h := Held{LeaseID: winner, Token: counter(views), TTL: ttls[len(ttls)-maj]}
	if h.TTL == math.MaxInt64 {
		h.TTL = -time.Millisecond
	}
	return h, d
}

// counter returns the greatest token a majority of views' counters reach.
func counter(views []node.View) int64 {
	var counters []int64
	for _, v := range views {
		if v.Err == nil {
			counters = append(counters, v.Counter)
		}
	}
	maj := Majority(len(views))
	if len(counters) < maj {
		return 0
	}
	slices.Sort(counters)
	return counters[len(counters)-maj]
}

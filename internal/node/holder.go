package node

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/internal/script"
)

// A View is what one node says of a lock, or of a semaphore's slot
// (lua/holder.lua). It never carries an owner value: leases are named by
// their public IDs.
type View struct {
	Err     error
	Held    bool
	LeaseID string        // the holder's, if Held
	TTL     time.Duration // the lock's remaining TTL if Held; negative: none
	Counter int64         // the token counter, 0 if there is none
	// DelayedBy is the lease whose expiry keeps the free lock unavailable
	// (lock-delay), "" for none; Delay how long it stands (negative:
	// without expiry).
	DelayedBy string
	Delay     time.Duration
}

// HolderArgs returns lua/holder.lua's run for the lock named name.
func (c *Config) HolderArgs(name string) []any {
	return append(script.Holder.Args("3", 3), c.LockKey(name), c.TokenKey(name), c.DelayKey(name))
}

// SlotsArgs returns lua/slots.lua's run for every slot of s.
func (s *Semaphore) SlotsArgs() []any {
	return append(script.Slots.Args(strconv.Itoa(len(s.keys)), len(s.keys)), s.keys...)
}

// ParseHolder reads lua/holder.lua's reply for the lock whose token key is
// tokenKey.
func ParseHolder(reply any, tokenKey string) View {
	r, ok := reply.([]any)
	if !ok || len(r) != 5 {
		return View{Err: fmt.Errorf("fencelock: malformed holder reply of %d fields", len(r))}
	}
	owner, ok1 := r[0].(string)
	pttl, ok2 := r[1].(int64)
	token, ok3 := r[2].(string)
	delayed, ok4 := r[3].(string)
	delay, ok5 := r[4].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		// Not %v of the reply: it holds owner secrets.
		return View{Err: fmt.Errorf("fencelock: malformed holder reply (%T, %T, %T, %T, %T)", r[0], r[1], r[2], r[3], r[4])}
	}
	var v View
	if token != "" {
		t, err := strconv.ParseInt(token, 10, 64)
		if err != nil || t <= 0 {
			return View{Err: fmt.Errorf("fencelock: token key %s holds %q, not a token", tokenKey, token)}
		}
		v.Counter = t
	}
	if owner != "" {
		v.Held, v.LeaseID, v.TTL = true, LeaseID(owner), time.Duration(pttl)*time.Millisecond
	} else if delayed != "" {
		v.DelayedBy, v.Delay = LeaseID(delayed), time.Duration(delay)*time.Millisecond
	}
	return v
}

// ParseSlots reads lua/slots.lua's reply for s: a View per slot, and the
// semaphore's number of permits, 0 if none is recorded.
func (s *Semaphore) ParseSlots(reply any) ([]View, int) {
	r, ok := reply.([]any)
	var slots []any
	var n string
	if ok && len(r) == 2 {
		slots, _ = r[0].([]any)
		n, _ = r[1].(string)
	}
	permits, err := strconv.Atoi(n)
	if n == "" {
		permits, err = 0, nil
	}
	if len(slots) != s.Permits || err != nil || permits < 0 {
		return Failed(s.Permits, fmt.Errorf("fencelock: malformed slots reply (%d slots, want %d; permits %q)", len(slots), s.Permits, n)), 0
	}
	vs := make([]View, s.Permits)
	for i := range vs {
		vs[i] = ParseHolder(slots[i], s.Tokens[i])
	}
	return vs, permits
}

// Failed returns views that all report err: a node's, when its read
// failed.
func Failed(n int, err error) []View {
	vs := make([]View, n)
	for i := range vs {
		vs[i].Err = err
	}
	return vs
}

package node

import (
	"strconv"

	"github.com/fencelock/fencelock/internal/script"
)

// A Protocol is what is kept under a name: a lock, a semaphore's permit or
// an election's leadership. Each is a lock and more, so the three differ
// only in the scripts a step runs and the keys and arguments those take
// beyond a lock's (the extending scripts compose the lock's, see package
// script): the steps themselves (take, renew, release, and their rounds
// on a quorum) are one path for all three, with the protocol a
// parameter.
type Protocol struct {
	name string
	// acquire takes the lock on one node; its reply is lua/acquire.lua's,
	// or for a permit lua/semaphore.lua's.
	acquire *script.Script
	// renew and release: the lock's, or scripts that compose them.
	renew, release *script.Script
	// native says that renew and release may be the native owner-checked
	// commands (SET IFEQ, DELEX, DELIFEQ) where the server has them: they
	// do what the lock's scripts do, and nothing more.
	native bool
	// quorum is what a quorum's nodes acquire: there, a permit's slot is
	// chosen by the client first, and a leadership's term after the first
	// round, so both take a lock on each node.
	quorum *Protocol
}

// The protocols.
var (
	Lock = &Protocol{name: "lock", acquire: script.Acquire, renew: script.Renew, release: script.Release, native: true}
	// Permit is a lock on a semaphore's slot; on one node the script
	// chooses the slot, among free ones.
	Permit = &Protocol{name: "permit", acquire: script.Semaphore, renew: script.Renew, release: script.Release, native: true}
	// PermitSlot is a permit whose slot the client chose: what a quorum's
	// nodes take.
	PermitSlot = &Protocol{name: "permit slot", acquire: script.Permit, renew: script.Renew, release: script.Release, native: true}
	// Leadership is a lock with a leader record and history beside it,
	// which the scripts keep with the lock.
	Leadership = &Protocol{name: "leadership", acquire: script.Campaign, renew: script.RenewLeader, release: script.Resign}
)

func init() {
	Lock.quorum, Permit.quorum, PermitSlot.quorum, Leadership.quorum = Lock, PermitSlot, PermitSlot, Lock
}

// Quorum returns the protocol that a quorum's nodes acquire for p.
func (p *Protocol) Quorum() *Protocol { return p.quorum }

// String names the protocol.
func (p *Protocol) String() string { return p.name }

// acquireArgs returns p's acquisition of r on one node: lua/acquire.lua's
// KEYS and ARGV, preceded for a permit by every slot's KEYS, and followed
// for a leadership by its record's. publish is the command that wakes an
// election's observers. The delay key is sent whatever this Client's
// LockDelay: another Client's lease may have left one.
func (p *Protocol) acquireArgs(c *Config, r *Ref, publish any) []any {
	switch p {
	case Permit:
		pk := r.Sem
		args := append(p.acquire.Args(strconv.Itoa(len(pk.keys)), len(pk.keys)+7), pk.keys...)
		args = append(args, pk.permitsArg, perSlot)
		return append(args, &r.Owner, c.TTLArg, c.RetentionArg, &r.Proposal, c.DelayArg)
	case PermitSlot:
		return append(p.acquire.Args("4", 10), r.LockArg, &r.Token, &r.Delay, r.Sem.Count,
			&r.Owner, c.TTLArg, c.RetentionArg, &r.Proposal, c.DelayArg, r.Sem.permitsArg)
	case Leadership:
		l := r.Lead
		return append(p.acquire.Args("5", 16), r.LockArg, &r.Token, &r.Delay, l.Record, l.History,
			&r.Owner, c.TTLArg, c.RetentionArg, &r.Proposal, c.DelayArg,
			LeaseID(r.Owner), l.Value, l.Since.UnixMicro(), l.Changed, publish, HistoryLen)
	}
	return append(p.acquire.Args("3", 8), r.LockArg, &r.Token, &r.Delay,
		&r.Owner, c.TTLArg, c.RetentionArg, &r.Proposal, c.DelayArg)
}

// renewArgs returns p's renewal of r: lua/renew.lua's KEYS and ARGV,
// followed for a leadership by its record's keys.
func (p *Protocol) renewArgs(c *Config, r *Ref) []any {
	if p == Leadership {
		return append(p.renew.Args("5", 9), r.LockArg, &r.Token, &r.Delay, r.Lead.Record, r.Lead.History,
			&r.Owner, c.TTLArg, c.RetentionArg, c.DelayArg)
	}
	return append(p.renew.Args("3", 7), r.LockArg, &r.Token, &r.Delay, &r.Owner, c.TTLArg, c.RetentionArg, c.DelayArg)
}

// releaseArgs returns p's release of r: lua/release.lua's KEYS and ARGV,
// followed for a leadership by its record's. publish is PUBLISH or
// SPUBLISH. Without LockDelay, this Client's leases write no delay key, so
// a lock's release reads none: one GET less per release, and the native
// release's rule.
func (p *Protocol) releaseArgs(c *Config, r *Ref, publish any) []any {
	switch {
	case p == Leadership:
		return append(p.release.Args("4", 10), r.LockArg, &r.Delay, r.Lead.Record, r.Lead.History,
			&r.Owner, r.ChannelArg, publish, r.Lead.Changed, c.RetentionArg, HistoryLen)
	case c.LockDelay == 0:
		return append(p.release.Args("1", 4), r.LockArg, &r.Owner, r.ChannelArg, publish)
	}
	return append(p.release.Args("2", 5), r.LockArg, &r.Delay, &r.Owner, r.ChannelArg, publish)
}

// AnnounceArgs returns lua/announce.lua's run: r's leadership, of term,
// announces value as its change kind ("elected", or "proclaimed" as the
// seq-th Proclaim of the term). publish wakes the observers (Publish).
func AnnounceArgs(c *Config, r *Ref, kind string, term, seq int64, value string, publish any) []any {
	l := r.Lead
	return append(script.Announce.Args("3", 14), r.LockArg, l.Record, l.History,
		&r.Owner, kind, term, LeaseID(r.Owner), value, seq, l.Since.UnixMicro(),
		l.Changed, publish, c.RetentionArg, HistoryLen)
}

package fencelock

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// A lockRef is what the commands of one acquisition attempt, and of the
// lease it becomes, send: the lock's keys and channel, and the attempt's
// owner value. Every command of a lease sends them, so they are made
// once, in one allocation (substrings of one string), and the commands
// pass pointers to them instead of boxing each string anew. Only the lock
// key, the first key, is boxed as a string: go-redis routes by it on a
// Cluster, and hooks that inspect commands see it as such.
type lockRef struct {
	name    string
	owner   string // secret: allows renew and release
	lock    string // prefix{name}
	token   string // prefix{name}:token, the token counter
	channel string // prefix{name}:released, published on release
	delay   string // prefix{name}:delay, the lock-delay key (lua/acquire.lua)
	lockArg any    // lock, boxed once
	// channelArg is channel, boxed once, for the release: hooks that
	// tell a release from a renewal look for the channel among its
	// arguments.
	channelArg any

	// proposal is the token a quorum's attempt proposes to every node, 0
	// for none (quorum.go).
	proposal int64

	// permit is the semaphore whose permit the attempt takes, nil for a
	// lock (semaphore.go). slot is the permit's slot, -1 until an
	// acquisition chose it; then lock and token are that slot's, and
	// slotName its fence name.
	permit   *permitKeys
	slot     int
	slotName string
}

// ownerLen is the length of an owner value made by setRef: 16 random
// bytes in unpadded base64.
const ownerLen = 22

// setRef fills r for the lock named name and owner; an empty owner gets a
// new unguessable one, 16 bytes from crypto/rand. Only its holder knows
// it: renew and release need it.
func (c *config) setRef(r *lockRef, name, owner string) {
	var enc [ownerLen]byte
	if owner == "" {
		var raw [16]byte
		rand.Read(raw[:]) // never fails (crypto/rand, Go 1.24+)
		base64.RawURLEncoding.Encode(enc[:], raw[:])
	}
	const token, released, delay = "}:token", "}:released", "}:delay"
	base := len(c.prefix) + 1 + len(name)
	var b strings.Builder
	b.Grow(ownerLen + len(owner) + 3*base + len(token) + len(released) + len(delay))
	if owner == "" {
		b.Write(enc[:])
	} else {
		b.WriteString(owner)
	}
	for _, suffix := range [...]string{token, released, delay} {
		b.WriteString(c.prefix)
		b.WriteByte('{')
		b.WriteString(name)
		b.WriteString(suffix)
	}
	s := b.String()
	i := len(s) - 3*base - len(token) - len(released) - len(delay)
	r.name, r.owner = name, s[:i]
	r.token, i = s[i:i+base+len(token)], i+base+len(token)
	r.lock = r.token[:base+1]
	r.channel, i = s[i:i+base+len(released)], i+base+len(released)
	r.delay = s[i:]
	r.lockArg, r.channelArg = r.lock, r.channel
}

// leaseID derives the public ID of a lease from its owner value (made by
// config.setRef): a truncated SHA-256, so it names the lease in logs and
// fences without revealing anything that would let its reader release or
// renew the lock.
func leaseID(owner string) string {
	const label = "fencelock lease id\x00"
	var buf [len(label) + MaxSecretLen]byte
	b := append(append(buf[:0], label...), owner...)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

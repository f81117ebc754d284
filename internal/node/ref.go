package node

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Config is what the protocol needs of a Client's Options, with defaults
// applied and derived values computed (the root package's Options.config
// makes it).
type Config struct {
	TTL            time.Duration
	Drift          time.Duration // the allowance for clock drift, kept before the TTL runs out
	Retry          time.Duration // RetryInterval
	ReplicaTimeout time.Duration
	NodeTimeout    time.Duration // a quorum round's bound per node
	LockDelay      time.Duration
	MinReplicas    int
	Prefix         string

	// The scripts' numeric arguments, in milliseconds, boxed once.
	CounterTTL   time.Duration // the counter's expiry at each use: retention + TTL, 0 to keep it
	TTLArg       any           // TTL in ms
	RetentionArg any           // CounterTTL in ms
	DelayArg     any           // the delay key's expiry, TTL + LockDelay, in ms; 0 for no delay
}

// DefaultConfig returns the Config of a Client with default Options (the
// root package's Options documents them): for the tests of the internal
// packages, which cannot import the root.
func DefaultConfig() *Config {
	const ttl, retention = 10 * time.Second, 24 * time.Hour
	return &Config{
		TTL: ttl, Drift: ttl/100 + 2*time.Millisecond, Retry: 500 * time.Millisecond,
		ReplicaTimeout: time.Second, NodeTimeout: 500 * time.Millisecond, Prefix: "fencelock:",
		CounterTTL: retention + ttl, TTLArg: ttl.Milliseconds(), RetentionArg: (retention + ttl).Milliseconds(),
		DelayArg: int64(0),
	}
}

// Keys and channels: the lock (prefix{name}), its token counter
// (prefix{name}:token), its release channel and lock-delay key, and an
// election's record, history and observers' channel, share a hash tag,
// so that one script can touch them all on a Cluster. The commands of an
// attempt and its lease take the first four from a Ref, made in one
// allocation; these are for the rest.

func (c *Config) LockKey(name string) string        { return c.Prefix + "{" + name + "}" }
func (c *Config) TokenKey(name string) string       { return c.LockKey(name) + ":token" }
func (c *Config) Channel(name string) string        { return c.LockKey(name) + ":released" }
func (c *Config) DelayKey(name string) string       { return c.LockKey(name) + ":delay" }
func (c *Config) LeaderKey(name string) string      { return c.LockKey(name) + ":leader" }
func (c *Config) HistoryKey(name string) string     { return c.LockKey(name) + ":history" }
func (c *Config) ChangedChannel(name string) string { return c.LockKey(name) + ":changed" }

// HistoryLen is how many changes an election's history keeps: an
// observer that misses more (disconnected through that many elections)
// skips the oldest of them.
const HistoryLen = 64

// A Ref is what the commands of one acquisition attempt, and of the lease
// it becomes, send: the protocol, the lock's keys and channel, and the
// attempt's owner value. Every command of a lease sends them, so they are
// made once, in one allocation (substrings of one string), and the
// commands pass pointers to them instead of boxing each string anew. Only
// the lock key, the first key, is boxed as a string: go-redis routes by it
// on a Cluster, and hooks that inspect commands see it as such.
type Ref struct {
	Proto   *Protocol
	Name    string
	Owner   string // secret: allows renew and release
	Lock    string // prefix{name}
	Token   string // prefix{name}:token, the token counter
	Channel string // prefix{name}:released, published on release
	Delay   string // prefix{name}:delay, the lock-delay key
	LockArg any    // Lock, boxed once
	// ChannelArg is Channel, boxed once, for the release: hooks that tell
	// a release from a renewal look for the channel among its arguments.
	ChannelArg any

	// Proposal is the token a quorum's attempt proposes to every node, 0
	// for none.
	Proposal int64

	// Sem is the semaphore whose permit a Permit attempt takes. Slot is
	// the permit's slot, -1 until an acquisition chose it; then Lock,
	// Token and Delay are that slot's, and SlotName its fence name.
	Sem      *Semaphore
	Slot     int
	SlotName string

	// Lead is a Leadership attempt's record.
	Lead *Lead
}

// OwnerLen is the length of an owner value made by SetRef: 16 random
// bytes in unpadded base64.
const OwnerLen = 22

// MaxSecretLen bounds an owner value, in bytes.
const MaxSecretLen = 256

// SetRef fills r for protocol p on the lock named name and owner; an empty
// owner gets a new unguessable one, 16 bytes from crypto/rand. Only its
// holder knows it: renew and release need it.
func (c *Config) SetRef(r *Ref, p *Protocol, name, owner string) {
	var enc [OwnerLen]byte
	if owner == "" {
		var raw [16]byte
		rand.Read(raw[:]) // never fails (crypto/rand, Go 1.24+)
		base64.RawURLEncoding.Encode(enc[:], raw[:])
	}
	const token, released, delay = "}:token", "}:released", "}:delay"
	base := len(c.Prefix) + 1 + len(name)
	var b strings.Builder
	b.Grow(OwnerLen + len(owner) + 3*base + len(token) + len(released) + len(delay))
	if owner == "" {
		b.Write(enc[:])
	} else {
		b.WriteString(owner)
	}
	for _, suffix := range [...]string{token, released, delay} {
		b.WriteString(c.Prefix)
		b.WriteByte('{')
		b.WriteString(name)
		b.WriteString(suffix)
	}
	s := b.String()
	i := len(s) - 3*base - len(token) - len(released) - len(delay)
	r.Proto, r.Name, r.Owner = p, name, s[:i]
	r.Token, i = s[i:i+base+len(token)], i+base+len(token)
	r.Lock = r.Token[:base+1]
	r.Channel, i = s[i:i+base+len(released)], i+base+len(released)
	r.Delay = s[i:]
	r.LockArg, r.ChannelArg = r.Lock, r.Channel
	r.Slot = -1
}

// LeaseID derives the public ID of a lease from its owner value: a
// truncated SHA-256, so it names the lease in logs and fences without
// revealing anything that would let its reader release or renew the lock.
func LeaseID(owner string) string {
	const label = "fencelock lease id\x00"
	var buf [len(label) + MaxSecretLen]byte
	b := append(append(buf[:0], label...), owner...)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// A Semaphore is a semaphore's keys, built once per Semaphore so that an
// attempt sends boxed strings it shares with every other.
type Semaphore struct {
	Name       string
	Permits    int
	Channel    string
	ChannelArg any
	Locks      []string // slot i's lock key
	Tokens     []string // slot i's token counter
	Delays     []string // slot i's lock-delay key
	Count      string   // the semaphore's number of permits (lua/permit.lua)
	// keys are each slot's lua/acquire.lua (and lua/holder.lua) KEYS,
	// perSlot of them, then Count, boxed once: lua/semaphore.lua's and
	// lua/slots.lua's KEYS.
	keys []any
	// releaseKeys are each slot's lock and lock-delay keys, boxed once:
	// lua/semaphore_release.lua's KEYS.
	releaseKeys []any
	permitsArg  any // Permits in decimal, boxed once
}

// perSlot is how many keys lua/acquire.lua takes for one slot.
const perSlot = 3

// Semaphore builds the keys of the semaphore named name with permits slots.
func (c *Config) Semaphore(name string, permits int) *Semaphore {
	base := c.Prefix + "{" + name + "}:permit"
	p := &Semaphore{Name: name, Permits: permits, Channel: base + "s:released", Count: base + "s",
		Locks: make([]string, permits), Tokens: make([]string, permits), Delays: make([]string, permits),
		keys: make([]any, 0, perSlot*permits+1), releaseKeys: make([]any, 0, 2*permits)}
	p.ChannelArg = p.Channel
	for i := range permits {
		p.Locks[i] = base + ":" + strconv.Itoa(i)
		p.Tokens[i] = p.Locks[i] + ":token"
		p.Delays[i] = p.Locks[i] + ":delay"
		p.releaseKeys = append(p.releaseKeys, p.Locks[i], p.Delays[i])
		p.keys = append(p.keys, p.Locks[i], p.Tokens[i], p.Delays[i])
	}
	p.keys = append(p.keys, p.Count)
	p.permitsArg = strconv.Itoa(permits)
	return p
}

// SlotName returns the fence name of the semaphore name's slot: the Lock
// of the Fence of a permit in that slot, "name{permit slot}".
func SlotName(name string, slot int) string {
	return name + "{permit " + strconv.Itoa(slot) + "}"
}

// UsePermit makes r, set by SetRef for Permit, an attempt to take a permit
// of p: its slot unknown until an acquisition reply names it (UseSlot),
// its channel the semaphore's.
func (r *Ref) UsePermit(p *Semaphore) {
	r.Sem, r.Slot = p, -1
	r.Channel, r.ChannelArg = p.Channel, p.ChannelArg
}

// UseSlot points r's lock, token and delay keys at slot i of its
// semaphore.
func (r *Ref) UseSlot(i int) {
	p := r.Sem
	r.Slot = i
	r.Lock, r.Token, r.Delay, r.LockArg = p.Locks[i], p.Tokens[i], p.Delays[i], p.keys[perSlot*i]
	r.SlotName = SlotName(p.Name, i)
}

// A Lead is what a Leadership attempt announces, and its election's other
// keys.
type Lead struct {
	Value   string
	Since   time.Time // when the attempt was sent; the leadership's since
	Record  string    // the leader record key
	History string    // the history key
	Changed string    // the observers' channel
}

// UseLead makes r, set by SetRef for Leadership, an attempt to lead with
// value, sent now.
func (r *Ref) UseLead(c *Config, value string) {
	r.Lead = &Lead{Value: value, Since: time.Now(),
		Record: c.LeaderKey(r.Name), History: c.HistoryKey(r.Name), Changed: c.ChangedChannel(r.Name)}
}

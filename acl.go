package fencelock

import (
	"slices"
	"strings"
)

// ACLOptions describe, for ACLRule, what a fencelock user does and the
// servers it reaches. A nil *ACLOptions describes locks (no elections)
// under the default Prefix, without MinReplicas, on standalone or
// Sentinel-managed servers older than Redis 8.4 and Valkey 9.0: a rule
// that every server accepts.
type ACLOptions struct {
	// Prefix is the Client's Options.Prefix.
	// Default: "fencelock:".
	Prefix string

	// Elections says the user also campaigns, leads or observes elections
	// (Client.Election), whose scripts keep a leader record (a hash) and
	// a history (a stream) beside the lock.
	// Default: false.
	Elections bool

	// MinReplicas says the Client has Options.MinReplicas > 0, which
	// sends WAIT after each acquisition.
	// Default: false.
	MinReplicas bool

	// Cluster says the servers are a Cluster's nodes (Redis >= 7.0 or
	// Valkey): wake-ups then use sharded pub/sub (PUBLISH while the
	// library does not know a master's SPUBLISH), and go-redis's cluster
	// client reads the slot map and the command table to route commands.
	// Default: false.
	Cluster bool

	// Redis84, Valkey9 and OlderServers say which servers the Client
	// reaches: Redis >= 8.4, Valkey >= 9.0, or others (older Redis or
	// Valkey). The rule grants Redis 8.4 DELEX and Valkey 9 DELIFEQ, the
	// native release. Every rule grants DEL, which the Lua release
	// calls: on older servers always, and on the others with LockDelay,
	// and while the library does not know a master's native commands (a
	// detection in flight, or unanswered mid failover). A server refuses
	// a rule that names a command it lacks, so set only what the servers
	// have; set several for a Cluster or a Sentinel group mid rolling
	// upgrade, which mixes them.
	// Default: none set, which means OlderServers.
	Redis84, Valkey9, OlderServers bool

	// Sentinel says the servers are a Sentinel group's data servers.
	// With Rueidis, the rule then grants ROLE, which rueidis and
	// valkey-go ask a master before they use it; go-redis needs nothing
	// more there than on a standalone server.
	// Default: false.
	Sentinel bool

	// Rueidis says the Client runs over rueidis or valkey-go
	// (transport/rueidisconn, transport/valkeyconn). They clean a
	// dedicated connection they take back (a lease's watch; on a Cluster,
	// MinReplicas' WAIT) with UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE and
	// DISCARD, which the rule then grants. On a Cluster they route by
	// their own slot map, which they read with CLUSTER SHARDS from
	// servers of version 8 on and CLUSTER SLOTS before (the rule grants
	// both), so the library's COMMAND INFO is all the rule grants of
	// COMMAND; through Sentinel, see Sentinel. What else they
	// send on connecting (CLUSTER SLOTS to a standalone server, CLIENT
	// SETINFO) their options spare (docs/topologies.md).
	// Default: false (go-redis).
	Rueidis bool
}

// aclRueidis is what rueidis and valkey-go send to clean a dedicated
// connection they take back.
const aclRueidis = "+discard +unsubscribe +punsubscribe +sunsubscribe"

// aclElection is what an election's scripts call beyond a lock's: the
// record's hash, the history's stream, TYPE checks against keys of the
// wrong type, and the record's expiry set to the lock's.
const aclElection = "+type +hget +hmget +hset +pexpireat +pexpiretime +xadd +xrange +xrevrange"

// ACLRule returns the least-privilege ACL rule of a fencelock user on the
// servers that o describes: the permissions that follow
// "ACL SETUSER NAME reset on >PASSWORD", on every server, replicas
// included (a promoted replica needs the user too). They are what the
// library sends there: the scripts and the commands they call (ACL rules
// apply inside scripts), the native commands, the wake-ups' pub/sub on
// the prefix's channels, CLIENT TRACKING and GET, which watch a lease's
// lock (Lease.Context), and what go-redis sends on its own (PING on an
// idle subscription, which the watch sends too; on Cluster, CLUSTER
// SLOTS and COMMAND), or with Rueidis what rueidis and valkey-go send.
// The rules are tested against every server of the test matrix, on each
// transport, and docs/topologies.md states them.
//
// The rule covers locks: acquire, wait, renew, release; with Elections,
// elections too. CLIENT SETINFO, which go-redis sends on each new connection and
// whose refusal it ignores, is not in it either: set DisableIdentity in
// the go-redis options, or add +client|setinfo.
//
// The permissions are separated by single spaces; where a Prefix holds a
// space, quote its two patterns when typing the rule.
func ACLRule(o *ACLOptions) string {
	var opts ACLOptions
	if o != nil {
		opts = *o
	}
	if opts.Prefix == "" {
		opts.Prefix = "fencelock:"
	}
	p := aclPattern(opts.Prefix)
	rule := []string{"~" + p, "&" + p, "+evalsha", "+eval", "+get", "+set", "+pttl", "+time", "+pexpire", "+client|tracking", "+del"}
	if opts.Redis84 {
		rule = append(rule, "+delex")
	}
	if opts.Valkey9 {
		rule = append(rule, "+delifeq")
	}
	// On Cluster, PUBLISH is the Lua release's wake-up while the library
	// does not know that a master has SPUBLISH.
	switch {
	case opts.Cluster && opts.Rueidis:
		rule = append(rule, "+spublish", "+publish", "+ssubscribe", "+ping", "+command|info", "+cluster|slots", "+cluster|shards")
	case opts.Cluster:
		rule = append(rule, "+spublish", "+publish", "+ssubscribe", "+ping", "+command", "+cluster|slots")
	default:
		rule = append(rule, "+publish", "+subscribe", "+unsubscribe", "+ping", "+command|info")
	}
	if opts.MinReplicas {
		rule = append(rule, "+wait")
	}
	if opts.Rueidis {
		if opts.Sentinel {
			rule = append(rule, "+role")
		}
		for _, p := range strings.Fields(aclRueidis) {
			if !slices.Contains(rule, p) {
				rule = append(rule, p)
			}
		}
	}
	if opts.Elections {
		rule = append(rule, strings.Fields(aclElection)...)
	}
	return strings.Join(rule, " ")
}

// SentinelACLRule is the least-privilege ACL rule, on every sentinel, of
// the user that go-redis's failover client logs in to the sentinels with
// (FailoverOptions.SentinelUsername): it asks for the master and the
// other sentinels, and listens for failovers. The data servers' user
// needs ACLRule's rule.
const SentinelACLRule = "&+switch-master &+replica-reconf-done +sentinel|get-master-addr-by-name +sentinel|sentinels +subscribe +ping"

// RueidisSentinelACLRule is SentinelACLRule for rueidis and valkey-go
// (transport/rueidisconn, transport/valkeyconn): they ask the master and
// the other sentinels when the client is made, and hear of failovers,
// new sentinels and reboots on six channels, in one SUBSCRIBE that the
// lack of any one of them refuses whole. The data servers' user needs
// ACLRule's rule with Rueidis and Sentinel.
const RueidisSentinelACLRule = "&+sentinel &+slave &-sdown &+sdown &+switch-master &+reboot +sentinel|get-master-addr-by-name +sentinel|sentinels +subscribe +unsubscribe +ping"

// aclPattern returns the key and channel pattern of everything under
// prefix: the prefix with its glob characters escaped, then *.
func aclPattern(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

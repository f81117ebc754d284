package node

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock/internal/errs"

	"github.com/redis/go-redis/v9"
)

// errClass is what a Redis error reply tells the library to do. The
// prefixes of the replies it acts on are in one table, replyClasses.
type errClass int

const (
	// errOther: an error that would only repeat (a wrong type, a script
	// error): returned at once.
	errOther errClass = iota
	// errCured: the server cannot serve the request now, and a failover
	// or restart cures it (a replica, a node loading or out of its slot
	// map): Acquire retries.
	errCured
	// errNativeRefused: a native command cannot run for this client (an
	// older server, a node of a Cluster mid rolling upgrade, a command
	// renamed away, an ACL that refuses it). Nothing was written, and the
	// Lua scripts do the same.
	errNativeRefused
)

// replyClasses classes the error replies by their first word, as servers
// send them; the rest are errOther. A reply of class errCured says the
// request did not run, but not that an earlier try of the same call,
// which go-redis may have sent before it, did not: no cleanup is decided
// by it (see node.take).
var replyClasses = []struct {
	prefix string
	class  errClass
	reload bool // a Cluster client reloads its slot map (see node.follow)
}{
	{"READONLY", errCured, false},
	{"LOADING", errCured, false},
	{"MASTERDOWN", errCured, false},
	{"CLUSTERDOWN", errCured, true},
	{"TRYAGAIN", errCured, false},
	{"MOVED", errCured, true},
	{"ASK", errCured, false},
	{"NOPERM", errNativeRefused, false},
	{"unknown command", errNativeRefused, false},
	{"syntax error", errNativeRefused, false},
}

// classOf returns the class of a Redis error reply, and whether a Cluster
// client should reload its slot map after it; errOther for anything else.
func classOf(err error) (errClass, bool) {
	if err == nil {
		return errOther, false // and no allocation: HasErrorPrefix makes one
	}
	for _, c := range replyClasses {
		if redis.HasErrorPrefix(err, c.prefix) {
			return c.class, c.reload
		}
	}
	return errOther, false
}

// nativeRefused reports whether err says that a native command cannot run
// for this client (errNativeRefused).
func nativeRefused(err error) bool {
	c, _ := classOf(err)
	return c == errNativeRefused
}

// wrongType reports whether err is a WRONGTYPE reply: a key that holds
// another type.
func wrongType(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "WRONGTYPE")
}

// Transient reports whether err, an acquisition's, may pass if the
// attempt is made again: an error reply that a failover or restart cures
// (a replica, a node loading or out of its slot map), or a transport error
// (the connection may come back). Other replies (a wrong type, a script
// error) would only repeat.
func Transient(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		c, _ := classOf(err)
		return c == errCured
	}
	return true
}

// unauthenticated reports whether err is Redis's refusal of a command of
// many arguments from a client that has not authenticated ("ERR Protocol
// error: unauthenticated multibulk length"): a protocol error on its face,
// a missing password in fact.
func unauthenticated(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "Protocol error: unauthenticated") // "ERR " is trimmed
}

// permitsRefused returns err, an acquisition's; when it is lua/permits.lua's
// refusal of a number of permits other than the semaphore's, as an error
// wrapping ErrInvalid that names both numbers and the way to change them.
func permitsRefused(r *Ref, err error) error {
	const prefix = "fencelock: semaphore has "
	if err == nil || !redis.HasErrorPrefix(err, prefix) {
		return err
	}
	msg := err.Error()
	have, _ := strconv.Atoi(strings.TrimSuffix(msg[strings.Index(msg, prefix)+len(prefix):], " permits"))
	return r.Sem.Mismatch(have)
}

// Mismatch is the error of an acquisition of s on a semaphore that has
// another number of permits, have.
func (s *Semaphore) Mismatch(have int) error {
	return fmt.Errorf("%w: semaphore %q has %d permits, not %d: use one number, or Semaphore.Resize to change it",
		errs.ErrInvalid, s.Name, have, s.Permits)
}

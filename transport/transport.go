// Package transport is what fencelock needs of a Redis client library:
// a Conn carries the library's commands to one deployment, and a
// Subscription its wake-ups. fencelock.New wraps a go-redis client in one
// (GoRedis); the modules fencevalkey and fencerueidis wrap valkey-go and
// rueidis clients, whose writes and reads overlap on one connection.
// Applications do not use this package: they call those constructors.
//
// Commands are go-redis's command values (redis.IntCmd, redis.Cmd, ...),
// the library's one vocabulary for a command and its reply whatever
// carries it: a Conn sends a command's Args and fills its reply with
// SetVal and SetErr, as go-redis itself does. An error reply is an error
// with a RedisError method (redis.Error), whose text is the server's, so
// that redis.HasErrorPrefix reads its first word; a nil reply is
// redis.Nil. A command's reply is read only after the call that sent it
// returned nil, or the command's own error.
//
// The interface is young, and may change with the library's minor
// versions.
package transport

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// A Conn reaches one Redis deployment: a standalone server, the master of
// a Sentinel group, or a Cluster (each command to the master serving its
// first key's slot). It must end every request at its context's deadline
// or cancellation.
type Conn interface {
	// Process sends cmd and fills its reply. It returns cmd's error.
	Process(ctx context.Context, cmd redis.Cmder) error

	// Pipeline sends cmds in one round trip, in order, and fills each
	// one's reply; one command's error reply fails no other. It returns
	// the first command's error, if any. On a Cluster the commands name
	// keys of one slot.
	Pipeline(ctx context.Context, cmds ...redis.Cmder) error

	// Master returns, on a Cluster, the address of the master that serves
	// key and a Conn to that master alone: commands that name no key
	// (WAIT after a write, COMMAND INFO) go there. Elsewhere it returns ""
	// and the Conn itself.
	Master(ctx context.Context, key string) (addr string, master Conn, err error)

	// Cluster reports whether the deployment is a Cluster.
	Cluster() bool

	// Reload asks a Cluster client to reload its map of slots to masters,
	// after an error that a failover may explain; elsewhere it does
	// nothing.
	Reload(ctx context.Context)

	// Subscribe returns a subscription to channels: with sharded, to one
	// channel by SSUBSCRIBE on the shard that holds it (Cluster), else by
	// SUBSCRIBE. It is re-established after a reconnect, each time
	// confirmed by an Event. Errors surface as missing Events: the
	// library falls back to its timers.
	Subscribe(ctx context.Context, sharded bool, channels ...string) Subscription

	// Connected reports whether the client holds a connection to the
	// deployment: false when none could be made (a refused or unreachable
	// address), for the errors that say so.
	Connected() bool

	// Pipelines reports whether the client sends concurrent callers'
	// commands together by itself, on connections whose writes and
	// reads overlap: the library then sends each call as it comes instead
	// of gathering calls into batches of its own.
	Pipelines() bool

	// Track returns a connection of its own whose reads the server
	// tracks (CLIENT TRACKING): changed is called, on another goroutine,
	// with the keys whose value a command changed (written, deleted,
	// expired, evicted) after the Tracker read them, nil for every key
	// (FLUSHALL). On a Cluster, Track is called on a master's Conn
	// (Master), and tracks the keys that master serves; where Master
	// names no master (""), the Tracker tracks every key, each on its
	// own master's connection. ErrNoTracking
	// says that the client cannot (a go-redis client on RESP2, for one):
	// the library then learns of a lost lock at its next renewal.
	Track(ctx context.Context, changed func(keys []string)) (Tracker, error)
}

// ErrNoTracking is Track's error when the client cannot track keys.
var ErrNoTracking = errors.New("transport: tracking not supported by this client")

// A Tracker is a connection with CLIENT TRACKING on (on a Cluster, where
// Master names no master, one per master).
type Tracker interface {
	// Read returns key's value ("" and false for none) and arms its
	// tracking: the next change of key calls changed. A read of a key
	// that changed meanwhile arms it again.
	Read(ctx context.Context, key string) (string, bool, error)
	// Done returns a channel closed once the connection is lost or
	// closed: the changes made after are not reported, and the keys must
	// be read on a new Tracker.
	Done() <-chan struct{}
	// Close ends the tracking and gives the connection back.
	Close()
}

// A Subscription receives the messages of its channels.
type Subscription interface {
	// Subscribe adds channels (not on a sharded subscription).
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe removes channels.
	Unsubscribe(ctx context.Context, channels ...string) error
	// Events returns what the subscription receives, until Close: it is
	// closed then.
	Events() <-chan Event
	// Close ends the subscription.
	Close() error
}

// An Event is a message on Channel, or, with Subscribed, the server's
// confirmation that Channel is subscribed (first, or again after a
// reconnect: messages may have been lost meanwhile).
type Event struct {
	Channel    string
	Subscribed bool
}

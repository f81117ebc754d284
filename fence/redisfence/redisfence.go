// Package redisfence keeps fenced values in Redis: a fence.Store whose
// every operation is one Lua script that checks the fence and reads or
// writes the value together, so nothing can come between the check and
// the access.
//
// The resource's Redis need not be the lock's: the lock issues fences,
// this store only compares them.
//
// # Keys
//
// A resource has two keys, a string for its value and a hash (fields
// lock, token, lease) for its fence:
//
//	{<prefix><resource>}        the value
//	{<prefix><resource>}:fence  the fence
//
// The braces are a Cluster hash tag, so both keys of a resource are in the
// same slot and one script may touch both. The prefix is inside the tag so
// that the tag is never empty, whatever the resource name (an empty tag
// would make Redis hash the whole key). The fence key never expires and
// must not be deleted or written by anything else: a lost fence lets an
// older holder write again.
//
// Tokens are compared as decimal strings, exactly over the whole int64
// range, never as Lua numbers (doubles).
package redisfence

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
)

// ErrWrongType reports that a key of a resource holds a Redis type the
// store did not put there. Nothing was changed.
var ErrWrongType = errors.New("redisfence: key holds the wrong kind of value")

// Options configure a Store. A nil *Options selects all defaults.
type Options struct {
	// Prefix starts every key, inside the hash tag. It must not start
	// with '}'. Default: "fence:".
	Prefix string

	// TTL, if positive, makes a value expire TTL after the Put that wrote
	// it (rounded up to a millisecond). The fence never expires, so an
	// expired value reads as empty but no older holder can write it
	// again. It must not be negative. Default: 0, values never expire.
	TTL time.Duration
}

// Store is a fence.Store kept in Redis. It is safe for concurrent use.
type Store struct {
	rdb    redis.Scripter
	prefix string
	ttl    string // milliseconds, "0" for none
	err    error  // invalid arguments to New, returned by every call
}

var _ fence.Store = (*Store)(nil)

// New returns a Store that runs its scripts through rdb, a *redis.Client,
// *redis.ClusterClient or any other redis.Scripter. A nil opts selects
// every default. Invalid options (a Prefix starting with '}', a negative
// TTL) or a nil rdb are reported, wrapping fence.ErrInvalid, by every call
// on the Store, which then sends nothing.
func New(rdb redis.Scripter, opts *Options) *Store {
	s := &Store{rdb: rdb, prefix: "fence:", ttl: "0"}
	var errs []error
	if rdb == nil || reflect.ValueOf(rdb).Kind() == reflect.Pointer && reflect.ValueOf(rdb).IsNil() {
		// A typed nil (a *redis.Client that is nil) is not == nil, and
		// its methods would panic.
		errs = append(errs, fmt.Errorf("%w: redisfence: nil Redis client", fence.ErrInvalid))
	}
	if opts != nil {
		if strings.HasPrefix(opts.Prefix, "}") {
			errs = append(errs, fmt.Errorf("%w: redisfence: Options.Prefix %q starts with '}'", fence.ErrInvalid, opts.Prefix))
		}
		if opts.Prefix != "" {
			s.prefix = opts.Prefix
		}
		if opts.TTL < 0 {
			errs = append(errs, fmt.Errorf("%w: redisfence: negative Options.TTL %v", fence.ErrInvalid, opts.TTL))
		}
		if opts.TTL > 0 {
			ms := (opts.TTL + time.Millisecond - 1) / time.Millisecond
			s.ttl = strconv.FormatInt(int64(ms), 10)
		}
	}
	s.err = errors.Join(errs...)
	return s
}

// keys returns the value and fence keys of resource.
func (s *Store) keys(resource string) []string {
	v := "{" + s.prefix + resource + "}"
	return []string{v, v + ":fence"}
}

// Put implements fence.Store.
func (s *Store) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := s.run(ctx, putScript, "put", resource, f, value, s.ttl)
	return err
}

// Get implements fence.Store.
func (s *Store) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	reply, err := s.run(ctx, getScript, "get", resource, f)
	if err != nil {
		return nil, err
	}
	return bytesOf(reply[1]), nil
}

// Delete implements fence.Store.
func (s *Store) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := s.run(ctx, deleteScript, "delete", resource, f)
	return err
}

// Load implements fence.Store.
func (s *Store) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	if s.err != nil {
		return nil, fence.Fence{}, fmt.Errorf("redisfence: load %q: %w", resource, s.err)
	}
	reply, err := loadScript.Run(ctx, s.rdb, s.keys(resource)).Slice()
	if err == nil {
		err = wrongType(reply)
	}
	if err != nil {
		return nil, fence.Fence{}, fmt.Errorf("redisfence: load %q: %w", resource, err)
	}
	if len(reply) != 5 {
		return nil, fence.Fence{}, fmt.Errorf("redisfence: load %q: unexpected reply %v", resource, reply)
	}
	if reply[3] == nil {
		return bytesOf(reply[1]), fence.Fence{}, nil
	}
	cur, err := fenceOf(reply[2:])
	if err != nil {
		return nil, fence.Fence{}, fmt.Errorf("redisfence: load %q: %w", resource, err)
	}
	return bytesOf(reply[1]), cur, nil
}

// run validates f, runs script with the fence's and extra arguments, and
// turns a refusal or a wrong-type reply into an error. On acceptance it
// returns the reply, whose first element is 1.
func (s *Store) run(ctx context.Context, script *redis.Script, op, resource string, f fence.Fence, extra ...any) ([]any, error) {
	if s.err != nil {
		return nil, fmt.Errorf("redisfence: %s %q: %w", op, resource, s.err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("redisfence: %s %q: %w", op, resource, err)
	}
	args := append([]any{f.Lock, strconv.FormatInt(f.Token, 10), f.Lease}, extra...)
	reply, err := script.Run(ctx, s.rdb, s.keys(resource), args...).Slice()
	if err == nil {
		err = wrongType(reply)
	}
	if err == nil && len(reply) > 0 && reply[0] == int64(0) {
		var cur fence.Fence
		if cur, err = fenceOf(reply[1:]); err == nil {
			err = &fence.StaleError{Current: cur, Rejected: f}
		}
	}
	if err == nil && (len(reply) == 0 || reply[0] != int64(1)) {
		err = fmt.Errorf("unexpected reply %v", reply)
	}
	if err != nil {
		return nil, fmt.Errorf("redisfence: %s %q: %w", op, resource, err)
	}
	return reply, nil
}

// wrongType returns an error for a {-1, key, type} reply.
func wrongType(reply []any) error {
	if len(reply) == 3 && reply[0] == int64(-1) {
		return fmt.Errorf("%w: %v is a %v", ErrWrongType, reply[1], reply[2])
	}
	return nil
}

// fenceOf reads {lock, token, lease} from a script reply.
func fenceOf(r []any) (fence.Fence, error) {
	if len(r) != 3 {
		return fence.Fence{}, fmt.Errorf("unexpected fence %v", r)
	}
	lock, ok1 := r[0].(string)
	token, ok2 := r[1].(string)
	lease, ok3 := r[2].(string)
	n, err := strconv.ParseInt(token, 10, 64)
	if !ok1 || !ok2 || !ok3 || err != nil {
		return fence.Fence{}, fmt.Errorf("malformed fence %q", r)
	}
	return fence.Fence{Lock: lock, Token: n, Lease: lease}, nil
}

// bytesOf returns a bulk string reply as bytes, nil for a nil reply.
func bytesOf(v any) []byte {
	s, _ := v.(string)
	if s == "" {
		return nil
	}
	return []byte(s)
}

// Package objfence is the fence logic of the adapters for object stores
// with conditional writes: a fence.Store over any Bucket whose writes can
// be made conditional on the version of the object they replace, or on
// its absence. Package s3fence is one such adapter (S3: the ETag, If-Match
// and If-None-Match: *); Google Cloud Storage (the generation,
// ifGenerationMatch, ifGenerationMatch=0), Azure Blob Storage (the ETag,
// If-Match, If-None-Match: *) and DynamoDB (a version attribute and a
// condition expression) have the same shape, so each is a Bucket of a few
// dozen lines in a module of its own, which keeps its SDK out of the
// library's go.mod.
//
// # Objects
//
// One object per resource holds both the resource's value and its fence,
// so that one conditional write changes both. The fence is in the body,
// on a first line of its own, ahead of the value:
//
//	fencelock-fence/1 "1764431234567890";lock="orders";lease="k3J9x"
//	<the value's bytes>
//
// It is in the body, not in the object's metadata, because an S3 ETag is
// a digest of the body alone: a fence kept in metadata could change while
// the ETag stays the same, and a write conditional on that ETag would let
// an older holder in after a newer one had only read.
//
// # Why it is atomic
//
// A fenced access reads the object (its body and version), applies
// fence.Check to the fence it holds, and writes the new body conditional
// on the version it read (on the object's absence if there was none). The
// store performs the write only if the object is still the one that was
// read, so the check and the write act on the same state: a write that
// lost the race changes nothing, and the access reads again and decides
// again. A version names one body, so a write conditional on it succeeds
// only if the fence is still the one checked.
//
// A fenced read that finds its own fence there writes nothing; one that
// finds an older fence writes the value back with its own. Delete writes
// a tombstone, an object with the fence and no value: deleting the object
// would forget the fence and let an older holder write again.
//
// Each Store remembers, per resource, the version and fence of the last
// object it read or wrote (up to maxCached resources), and tries its next
// write conditional on that version without reading first: if the object
// has changed since, the write fails and the access reads. The memory is a
// hint that saves a round trip, never a reason to accept or refuse.
package objfence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/fencelock/fencelock/fence"
)

var (
	// ErrNotFound is what Bucket.Get returns when there is no object at
	// the key.
	ErrNotFound = errors.New("no such object")

	// ErrConflict is what Bucket.Put returns when its condition failed:
	// the object is not at the version given, or, with no version, it
	// exists. Nothing was written.
	ErrConflict = errors.New("conditional write refused: the object changed")

	// ErrWrongFormat reports an object that a Store did not write: its
	// body does not start with a fence. Nothing was changed.
	ErrWrongFormat = errors.New("object is not a fenced value")

	// ErrContended reports an access that lost the race for the object
	// maxRaces times in a row: others wrote it between each read and
	// write. Nothing was changed by this access.
	ErrContended = errors.New("the object changed between read and write on every attempt")
)

// A Bucket is an object store with conditional writes. Each object has a
// version that names its body: two different bodies never have the same
// version (an ETag that is a digest of the body, a generation number
// that changes with each write). Implementations are safe for concurrent
// use.
type Bucket interface {
	// Get returns the body of the object at key, or its first limit
	// bytes if limit > 0, and the object's version. Without an object
	// at key, the error wraps ErrNotFound.
	Get(ctx context.Context, key string, limit int64) (body []byte, version string, err error)

	// Put writes body at key if the object's version is version or, if
	// version is "", if there is no object at key, in one atomic step,
	// and returns the new version ("" if the store did not say). If the
	// condition fails, the error wraps ErrConflict and nothing is
	// written.
	Put(ctx context.Context, key string, body []byte, version string) (newVersion string, err error)

	// Delete removes the object at key, unconditionally. Only Probe
	// uses it, for its own throw-away objects: a Store never deletes,
	// since the object keeps the fence.
	Delete(ctx context.Context, key string) error
}

// magic starts every object a Store writes, ahead of the fence's text
// form (fence.Fence.String) and a newline.
const magic = "fencelock-fence/1 "

// headLimit is how much of an object an access that needs only its
// fence reads: enough for the first line of any fence of a lock name up
// to a few kilobytes. Longer ones are read whole.
const headLimit = 4096

// maxRaces bounds the attempts of one access, each of which lost the
// race to another writer.
const maxRaces = 64

// maxCached bounds the resources a Store remembers a version of.
const maxCached = 1024

// MaxKey is the longest object key, in bytes: S3's, Google Cloud
// Storage's and Azure Blob Storage's limit (1024).
const MaxKey = 1024

// Encode returns the body of an object holding value under fence f.
func Encode(f fence.Fence, value []byte) []byte {
	s := f.String()
	b := make([]byte, 0, len(magic)+len(s)+1+len(value))
	b = append(b, magic...)
	b = append(b, s...)
	b = append(b, '\n')
	return append(b, value...)
}

// Decode reads an object's body, or its first bytes: the fence and the
// value after it (nil if empty). complete is false if body ends before
// the fence's line does, so that more of the object must be read. An
// object that is not a fenced value gives an error wrapping
// ErrWrongFormat.
func Decode(body []byte) (f fence.Fence, value []byte, complete bool, err error) {
	n := min(len(body), len(magic))
	if string(body[:n]) != magic[:n] {
		return fence.Fence{}, nil, false, fmt.Errorf("%w: it does not start with %q", ErrWrongFormat, strings.TrimSpace(magic))
	}
	line, value, found := bytes.Cut(body[n:], []byte{'\n'})
	if n < len(magic) || !found {
		return fence.Fence{}, nil, false, nil
	}
	f, err = fence.Parse(string(line))
	if err != nil {
		return fence.Fence{}, nil, false, fmt.Errorf("%w: its fence: %w", ErrWrongFormat, err)
	}
	if len(value) == 0 {
		value = nil
	}
	return f, value, true, nil
}

// Key returns the object key of resource under prefix. Resource names are
// opaque bytes, while object stores forbid some keys (empty ones, invalid
// UTF-8, too long) and file-system-backed ones rewrite others ("a//b",
// "a/./b", a backslash, a trailing slash), so Key escapes, as %XX, every
// byte but ASCII letters, digits and - _ . : , = @ /; and among those,
// the dots of a "." or ".." path segment, and a slash at either end or
// before another slash. The empty name is "~", which no other name gives
// (a tilde is always escaped). The result decodes back to resource by
// percent-decoding (but for "~"), so no two names share a key. A key
// longer than MaxKey is cut and ends with "~" and the SHA-256 of
// resource in hex, still unique but not decodable.
func Key(prefix, resource string) string {
	if resource == "" {
		return prefix + "~"
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(resource))
	b.WriteString(prefix)
	seg := 0 // start of the current segment in resource
	for i := 0; i < len(resource); i++ {
		c := resource[i]
		if c == '/' && i > 0 && i < len(resource)-1 && resource[i+1] != '/' {
			b.WriteByte('/')
			seg = i + 1
			continue
		}
		if c == '.' && dotSegment(resource, seg) {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	k := b.String()
	if len(k) <= MaxKey {
		return k
	}
	sum := sha256.Sum256([]byte(resource))
	tail := "~" + hex.EncodeToString(sum[:])
	cut := MaxKey - len(tail)
	// Cut before an escape rather than through it.
	for i := cut - 1; i >= cut-2 && i >= 0; i-- {
		if k[i] == '%' {
			cut = i
		}
	}
	return k[:cut] + tail
}

// dotSegment reports whether the segment of s that starts at seg is "."
// or "..": it ends at the next slash that Key keeps, or at the end.
func dotSegment(s string, seg int) bool {
	end := seg
	for end < len(s) && s[end] == '.' {
		end++
	}
	n := end - seg
	if n == 0 || n > 2 {
		return false
	}
	return end == len(s) || (s[end] == '/' && end < len(s)-1 && s[end+1] != '/')
}

func plain(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
		strings.IndexByte("-_.:,=@", c) >= 0
}

// Store is a fence.Store over a Bucket. It is safe for concurrent use.
type Store struct {
	b      Bucket
	name   string // the adapter's package, which starts every error
	prefix string

	mu    sync.Mutex
	cache map[string]state // key → the last object read or written
}

// state is what an access knows of an object: its version and fence, and
// its value if it was read whole.
type state struct {
	version string // "" if there is no object
	fence   fence.Fence
	value   []byte
	whole   bool // value is the whole value
	fresh   bool // read by this access, not remembered
}

var _ fence.Store = (*Store)(nil)

// New returns a Store of the objects under prefix in b. Its errors start
// with name, the adapter's package ("s3fence").
func New(b Bucket, name, prefix string) *Store {
	return &Store{b: b, name: name, prefix: prefix, cache: map[string]state{}}
}

// Put implements fence.Store.
func (s *Store) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := s.access(ctx, "put", resource, f, value)
	return err
}

// Get implements fence.Store.
func (s *Store) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return s.access(ctx, "get", resource, f, nil)
}

// Delete implements fence.Store.
func (s *Store) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := s.access(ctx, "delete", resource, f, nil)
	return err
}

// Load implements fence.Store.
func (s *Store) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	st, err := s.read(ctx, Key(s.prefix, resource), 0)
	if err != nil {
		return nil, fence.Fence{}, s.errorf(ctx, "load", resource, err)
	}
	return st.value, st.fence, nil
}

// access applies f to resource: op is "put" (write value), "get" (return
// the value) or "delete" (write a tombstone).
func (s *Store) access(ctx context.Context, op, resource string, f fence.Fence, value []byte) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, s.errorf(ctx, op, resource, err)
	}
	key := Key(s.prefix, resource)
	st, known := s.remembered(key)
	for race := 0; ; race++ {
		if race == maxRaces {
			return nil, s.errorf(ctx, op, resource, fmt.Errorf("%w (%d attempts)", ErrContended, maxRaces))
		}
		if err := ctx.Err(); err != nil {
			return nil, s.errorf(ctx, op, resource, err)
		}
		// A get needs the value: it reads whole, always. A put or
		// delete needs the fence and version, which it may remember.
		if op == "get" || !known {
			limit := int64(headLimit)
			if op == "get" {
				limit = 0
			}
			var err error
			if st, err = s.read(ctx, key, limit); err != nil {
				s.forget(key)
				return nil, s.errorf(ctx, op, resource, err)
			}
		}
		known = false // a lost race reads again
		if err := fence.Check(st.fence, f); err != nil {
			if !st.fresh {
				continue // remembered: the store may have moved on since
			}
			s.remember(key, st)
			return nil, s.errorf(ctx, op, resource, err)
		}
		var body []byte
		switch op {
		case "get":
			if st.fence == f && st.version != "" {
				s.remember(key, st)
				return st.value, nil
			}
			body = Encode(f, st.value)
		case "delete":
			if st.fresh && st.fence == f && st.whole && st.value == nil {
				s.remember(key, st)
				return nil, nil
			}
			body = Encode(f, nil)
		default:
			body = Encode(f, value)
		}
		v, err := s.b.Put(ctx, key, body, st.version)
		if errors.Is(err, ErrConflict) {
			s.forget(key)
			continue
		}
		if err != nil {
			// The write may or may not have happened.
			s.forget(key)
			return nil, s.errorf(ctx, op, resource, err)
		}
		if v != "" {
			s.remember(key, state{version: v, fence: f})
		} else {
			s.forget(key)
		}
		return st.value, nil
	}
}

// read reads the object at key, its first limit bytes if limit > 0, or
// more if its fence's line is longer.
func (s *Store) read(ctx context.Context, key string, limit int64) (state, error) {
	body, version, err := s.b.Get(ctx, key, limit)
	if errors.Is(err, ErrNotFound) {
		return state{whole: true, fresh: true}, nil
	}
	if err != nil {
		return state{}, err
	}
	f, value, complete, err := Decode(body)
	if err == nil && !complete && limit > 0 && int64(len(body)) >= limit {
		return s.read(ctx, key, 0) // the fence's line is longer than limit
	}
	if err == nil && !complete {
		err = fmt.Errorf("%w: no newline after the fence", ErrWrongFormat)
	}
	if err != nil {
		return state{}, fmt.Errorf("object %q: %w", key, err)
	}
	whole := limit <= 0 || int64(len(body)) < limit
	if !whole {
		value = nil
	}
	return state{version: version, fence: f, value: value, whole: whole, fresh: true}, nil
}

func (s *Store) remembered(key string) (state, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.cache[key]
	return st, ok
}

func (s *Store) remember(key string, st state) {
	if st.version == "" {
		s.forget(key)
		return
	}
	st = state{version: st.version, fence: st.fence}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cache[key]; !ok && len(s.cache) >= maxCached {
		for k := range s.cache { // any one: a hint is lost, not a decision
			delete(s.cache, k)
			break
		}
	}
	s.cache[key] = st
}

func (s *Store) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cache, key)
}

// errorf words an access's error: "s3fence: put "orders:42": ...", with
// ctx's error joined if it ended and err does not say so.
func (s *Store) errorf(ctx context.Context, op, resource string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return fmt.Errorf("%s: %s %q: %w", s.name, op, resource, err)
}

// Package s3fence keeps fenced values in an S3 bucket (AWS S3 or an
// S3-compatible store): a fence.Store whose every access is a
// compare-and-swap on the object's ETag, with the conditional writes S3
// has had since 2024 (If-None-Match: * to create, If-Match: ETAG to
// replace).
//
// This package is its own module so that the AWS SDK for Go v2 never
// enters the library's go.mod; the fence logic it shares with future
// adapters for other object stores (Google Cloud Storage, Azure Blob
// Storage and DynamoDB have the same shape) lives in the library.
//
// # Objects
//
// One object per resource, at the key Key returns, holds the resource's
// value and its fence: the fence's text form on a first line, then the
// value's bytes,
//
//	fencelock-fence/1 "1764431234567890";lock="orders";lease="k3J9x"
//	<the value>
//
// so that one conditional write changes both. The fence is in the body,
// not in metadata, because the ETag of an S3 object is a digest of its
// body alone: a fence kept in metadata could change under the same ETag,
// and a write conditional on that ETag would let an older holder in.
// Delete writes a tombstone (the fence, no value): the object must not be
// deleted, expired by a lifecycle rule, or written by anything but a
// Store, since a lost fence lets an older holder write again. The value
// of a resource is read with the Store (Load), or by any S3 client that
// skips the first line.
//
// # Why it is atomic
//
// A fenced access (Put, Get, Delete) reads the object, applies
// fence.Check to the fence it holds, and writes the new object with
// If-Match naming the ETag it read (If-None-Match: * if there was none).
// The store performs the write only if the object is still the one read,
// so the check and the write act on the same state; if another writer
// got in between, the write changes nothing (412 Precondition Failed, or
// 409 ConditionalRequestConflict), and the access reads again and decides
// again. An access that loses the race 64 times in a row gives up with
// ErrContended.
//
// # What it assumes of the store
//
//   - Conditional writes are enforced, atomically with the write: a PUT
//     with If-Match naming another ETag, or with If-None-Match: * on an
//     existing object, is refused, and of concurrent PUTs with If-Match
//     naming the same ETag exactly one succeeds. AWS S3 does this (since
//     2024-11 for If-Match). Some S3-compatible stores accept the headers
//     and ignore them; on such a store this package cannot protect
//     anything. Probe (and `fencelock doctor --resource s3://BUCKET/PREFIX`)
//     proves enforcement with throw-away objects before you rely on it.
//   - Strong read-after-write consistency: a GET after a successful PUT
//     returns that PUT's object (AWS S3 since 2020-12). Probe checks it
//     too.
//   - The ETag names the body: two different bodies never have the same
//     ETag (an MD5 digest, or a random ETag per write).
//
// # What it costs per access
//
// Requests, for a resource whose object is O bytes and a value of V:
//
//   - Put: one PUT of V + ~100 bytes when the Store's last access to the
//     resource left it the current ETag (the same process wrote or read
//     it last); else a ranged GET of the first 4 KiB first.
//   - Get: one GET of O when the fence is the one stored (the holder's
//     own, after its first access); a GET of O and a PUT of O with a
//     newer fence (the holder's first access).
//   - Delete: as Put, with a PUT of ~100 bytes (the tombstone); nothing
//     is written if the resource is already a tombstone of the same fence.
//   - Load: one GET of O.
//   - A lost race adds one ranged GET (a whole GET for Get) and one PUT.
//
// A read-modify-write by a holder (Get, then Put with the same fence)
// therefore costs one GET and one PUT, plus one PUT on the first access
// of a new lease. On S3 every request is a billed request: a PUT costs
// about ten GETs.
package s3fence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/internal/objfence"
)

var (
	// ErrWrongFormat reports an object at a resource's key that a Store
	// did not write: its body does not start with a fence. Nothing was
	// changed.
	ErrWrongFormat = objfence.ErrWrongFormat

	// ErrContended reports an access that lost the race for the object
	// to other writers on every attempt (64). Nothing was changed by it.
	ErrContended = objfence.ErrContended
)

// Client is the part of *s3.Client that a Store and Probe use.
type Client interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

var _ Client = (*s3.Client)(nil)

// Options configure a Store. A nil *Options selects all defaults.
type Options struct {
	// Prefix starts the key of every resource's object: "fence/" keeps
	// them apart from the bucket's other objects. It must be valid UTF-8
	// of at most 512 bytes. Default: none, the key is the escaped
	// resource name (Key).
	Prefix string
}

// maxPrefix leaves at least half of S3's 1024-byte keys to the name.
const maxPrefix = 512

// Store is a fence.Store kept in an S3 bucket. It is safe for concurrent
// use.
type Store struct {
	s      *objfence.Store
	prefix string
	err    error // invalid arguments to New, returned by every call
}

var _ fence.Store = (*Store)(nil)

// New returns a Store of the objects in bucket, reached through client,
// usually an *s3.Client. A nil opts selects every default. A nil client,
// an empty bucket name or an invalid Prefix are reported, wrapping
// fence.ErrInvalid, by every call on the Store, which then sends nothing.
func New(client Client, bucket string, opts *Options) *Store {
	s := &Store{}
	if opts != nil {
		s.prefix = opts.Prefix
	}
	var errs []error
	if client == nil {
		errs = append(errs, fmt.Errorf("%w: s3fence: nil S3 client", fence.ErrInvalid))
	}
	if bucket == "" {
		errs = append(errs, fmt.Errorf("%w: s3fence: empty bucket name", fence.ErrInvalid))
	}
	if len(s.prefix) > maxPrefix || !utf8.ValidString(s.prefix) {
		errs = append(errs, fmt.Errorf("%w: s3fence: Options.Prefix %.40q... is not UTF-8 of at most %d bytes", fence.ErrInvalid, s.prefix, maxPrefix))
	}
	s.err = errors.Join(errs...)
	s.s = objfence.New(&objects{c: client, bucket: bucket}, "s3fence", s.prefix)
	return s
}

// Key returns the object key of resource: Options.Prefix, then the name
// with every byte but ASCII letters, digits and - _ . : , = @ / escaped
// as %XX (and the dots of a "." or ".." segment, and a slash at either
// end or before another); the empty name is "~". So "orders:42" is at
// "orders:42", and "state/prod.tfstate" at "state/prod.tfstate", while
// no two names share a key. A key longer than 1024 bytes is cut and ends
// with "~" and the name's SHA-256.
func (s *Store) Key(resource string) string { return objfence.Key(s.prefix, resource) }

// Put implements fence.Store.
func (s *Store) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	if s.err != nil {
		return fmt.Errorf("s3fence: put %q: %w", resource, s.err)
	}
	return s.s.Put(ctx, resource, f, value)
}

// Get implements fence.Store.
func (s *Store) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	if s.err != nil {
		return nil, fmt.Errorf("s3fence: get %q: %w", resource, s.err)
	}
	return s.s.Get(ctx, resource, f)
}

// Delete implements fence.Store. It writes a tombstone: the object stays,
// with the fence and no value.
func (s *Store) Delete(ctx context.Context, resource string, f fence.Fence) error {
	if s.err != nil {
		return fmt.Errorf("s3fence: delete %q: %w", resource, s.err)
	}
	return s.s.Delete(ctx, resource, f)
}

// Load implements fence.Store.
func (s *Store) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	if s.err != nil {
		return nil, fence.Fence{}, fmt.Errorf("s3fence: load %q: %w", resource, s.err)
	}
	return s.s.Load(ctx, resource)
}

// objects is the objfence.Bucket of an S3 bucket.
type objects struct {
	c      Client
	bucket string
}

func (o *objects) Get(ctx context.Context, key string, limit int64) ([]byte, string, error) {
	in := &s3.GetObjectInput{Bucket: &o.bucket, Key: &key}
	if limit > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=0-%d", limit-1))
	}
	out, err := o.c.GetObject(ctx, in)
	if limit > 0 && status(err) == http.StatusRequestedRangeNotSatisfiable {
		// An empty object has no byte 0: read it whole (it is not ours).
		in.Range = nil
		out, err = o.c.GetObject(ctx, in)
	}
	if err != nil {
		if missing(err) {
			return nil, "", fmt.Errorf("%w: %w", objfence.ErrNotFound, err)
		}
		return nil, "", err
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("reading s3://%s/%s: %w", o.bucket, key, err)
	}
	return body, aws.ToString(out.ETag), nil
}

func (o *objects) Put(ctx context.Context, key string, body []byte, version string) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:        &o.bucket,
		Key:           &key,
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	}
	if version == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(version)
	}
	out, err := o.c.PutObject(ctx, in)
	if err != nil {
		if conflict(err) {
			return "", fmt.Errorf("%w: %w", objfence.ErrConflict, err)
		}
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

func (o *objects) Delete(ctx context.Context, key string) error {
	_, err := o.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &o.bucket, Key: &key})
	return err
}

// conflict reports whether a PUT's error says that its condition failed:
// 412 Precondition Failed; 409 ConditionalRequestConflict (a concurrent
// conditional write won); or 404 NoSuchKey, for If-Match on an object
// that is gone.
func conflict(err error) bool {
	switch status(err) {
	case http.StatusPreconditionFailed:
		return true
	case http.StatusConflict:
		return code(err) == "ConditionalRequestConflict"
	case http.StatusNotFound:
		return missing(err)
	}
	return false
}

// missing reports whether err says there is no object at the key (and
// not that there is no bucket).
func missing(err error) bool {
	return code(err) == "NoSuchKey" || (status(err) == http.StatusNotFound && code(err) != "NoSuchBucket")
}

// status returns the HTTP status of an S3 error response, 0 for other
// errors.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

// code returns the S3 error code of err ("NoSuchKey"), "" if none.
func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

package s3fence

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/internal/objfence"
)

// Severities of a Finding, from best to worst (those of fencelock doctor).
const (
	SevOK       = objfence.SevOK
	SevInfo     = objfence.SevInfo
	SevWarn     = objfence.SevWarn
	SevCritical = objfence.SevCritical
)

// A Finding is one result of Probe: which check, how bad (SevOK to
// SevCritical), what was seen, and, where something must change, what.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

// ProbeOptions configure Probe. A nil *ProbeOptions selects all defaults.
type ProbeOptions struct {
	// Writers is the number of concurrent PUTs per round of the race
	// check. Default: 8.
	Writers int
	// Rounds is the number of rounds of the race check. Default: 5.
	Rounds int
}

// unsafeFix is the fix of a finding that the store ignores a condition.
const unsafeFix = "do not rely on s3fence with this store: use one that enforces conditional writes " +
	"(AWS S3 does), or keep the resource behind a service that checks fences itself (package httpfence)"

// Probe proves, with a throw-away object under prefix in bucket that it
// deletes at the end, that the store enforces what a Store relies on,
// and returns one Finding per check:
//
//   - create: a PUT with If-None-Match: * creates a new object;
//   - read-after-write: a GET right after it returns what was written;
//   - if-none-match: a PUT with If-None-Match: * on the existing object
//     is refused, and the object is unchanged;
//   - if-match: a PUT with If-Match naming the current ETag succeeds, one
//     naming an older ETag (a stale holder's) is refused;
//   - race: in each round, of Writers concurrent PUTs with If-Match
//     naming the same ETag exactly one succeeds, and a GET returns its
//     body;
//   - cleanup: the object was deleted.
//
// A SevCritical finding means a Store on this store cannot keep the
// fencing rule, or cannot work. The error is not nil only if the store
// could not be used at all (unreachable, no such bucket, access denied):
// the first PUT failed otherwise than by its condition. Probe needs
// s3:GetObject, s3:PutObject and s3:DeleteObject under prefix; it writes
// about 10 + Writers×Rounds small objects' worth of PUTs.
func Probe(ctx context.Context, client Client, bucket, prefix string, opts *ProbeOptions) ([]Finding, error) {
	if client == nil || bucket == "" {
		return nil, fmt.Errorf("%w: s3fence: Probe needs a client and a bucket", fence.ErrInvalid)
	}
	var o *objfence.ProbeOptions
	if opts != nil {
		o = &objfence.ProbeOptions{Writers: opts.Writers, Rounds: opts.Rounds}
	}
	fs, err := objfence.Probe(ctx, &objects{c: client, bucket: bucket}, prefix, objfence.Terms{
		Version: "ETag",
		Match:   "If-Match",
		Absent:  "If-None-Match: *",
		Unsafe:  unsafeFix,
	}, o)
	out := make([]Finding, len(fs))
	for i, f := range fs {
		out[i] = Finding(f)
	}
	if err != nil {
		err = fmt.Errorf("s3fence: probe s3://%s/%s: %w", bucket, prefix, err)
	}
	return out, err
}

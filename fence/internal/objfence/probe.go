package objfence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Severities of a Finding, from best to worst: those of fencelock doctor.
const (
	SevOK       = "ok"
	SevInfo     = "info"
	SevWarn     = "warn"
	SevCritical = "critical"
)

// A Finding is one result of Probe.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

// Terms name, in findings, what the store calls a version and its two
// conditions: for S3, "ETag", "If-Match" and "If-None-Match: *".
type Terms struct {
	Version, Match, Absent string
	// Unsafe is the fix of a finding that the store does not enforce a
	// condition.
	Unsafe string
}

// ProbeOptions configure Probe. A nil *ProbeOptions selects all defaults.
type ProbeOptions struct {
	// Writers is the number of concurrent writes per round of the race
	// check. Default: 8.
	Writers int
	// Rounds is the number of rounds of the race check. Default: 5.
	Rounds int
}

// Probe proves, with a throw-away object at a new key under prefix, which
// it deletes at the end, that b enforces what a Store relies on: a
// conditional create succeeds and a read then returns what was written
// (strong read-after-write), a write conditional on absence is refused
// when the object exists, a write conditional on the current version
// succeeds and one on an older version is refused, and of concurrent
// writes conditional on the same version exactly one succeeds, in every
// round. Each check is a Finding; a critical one means that a Store on b
// cannot keep the fencing rule. Probe returns an error, with the findings
// so far, only if the store could not be used at all (unreachable,
// access denied): the first write failed otherwise than by its condition.
func Probe(ctx context.Context, b Bucket, prefix string, t Terms, opts *ProbeOptions) ([]Finding, error) {
	o := ProbeOptions{Writers: 8, Rounds: 5}
	if opts != nil {
		if opts.Writers > 0 {
			o.Writers = opts.Writers
		}
		if opts.Rounds > 0 {
			o.Rounds = opts.Rounds
		}
	}
	p := &prober{b: b, t: t, key: prefix + "fencelock-probe-" + randomHex(8)}
	p.run(ctx, o)
	return p.findings, p.err
}

type prober struct {
	b        Bucket
	t        Terms
	key      string
	findings []Finding
	err      error
	n        int // bodies written, to tell them apart
}

func (p *prober) add(check, sev, msg, fix string) {
	p.findings = append(p.findings, Finding{Check: check, Severity: sev, Message: msg, Fix: fix})
}

// body returns a new body, different from every other of the probe.
func (p *prober) body() []byte {
	p.n++
	return fmt.Appendf(nil, "fencelock probe %s write %d\n", p.key, p.n)
}

func (p *prober) run(ctx context.Context, o ProbeOptions) {
	t := p.t
	b1 := p.body()
	v1, err := p.b.Put(ctx, p.key, b1, "")
	switch {
	case errors.Is(err, ErrConflict):
		p.add("create", SevCritical, fmt.Sprintf("a write with %s to the new key %s was refused: objects cannot be created", t.Absent, p.key),
			"use a store that supports conditional writes")
		return
	case err != nil:
		p.err = fmt.Errorf("writing %s: %w", p.key, err)
		return
	}
	defer p.cleanup(ctx)
	p.add("create", SevOK, fmt.Sprintf("a write with %s created %s", t.Absent, p.key), "")
	if !p.readBack(ctx, "read-after-write", b1, v1, true) {
		return
	}

	// The object exists: a write conditional on its absence must fail.
	cur, curV := b1, v1
	bx := p.body()
	vx, err := p.b.Put(ctx, p.key, bx, "")
	p.verdict("if-none-match", err, fmt.Sprintf("a write with %s to the existing object", t.Absent))
	if err == nil {
		cur, curV = bx, vx // go on from what the store took
	}
	if !p.readBack(ctx, "if-none-match", cur, curV, false) {
		return
	}

	// On the current version a conditional write must succeed.
	b2 := p.body()
	v2, err := p.b.Put(ctx, p.key, b2, curV)
	switch {
	case errors.Is(err, ErrConflict):
		p.add("if-match", SevCritical, fmt.Sprintf("a write with %s naming the current %s %s was refused: objects cannot be replaced", t.Match, t.Version, curV),
			"use a store that supports conditional writes")
		return
	case err != nil:
		p.add("if-match", SevCritical, fmt.Sprintf("a write with %s naming the current %s failed: %v", t.Match, t.Version, err), "")
		return
	}
	if !p.readBack(ctx, "if-match", b2, v2, false) {
		return
	}
	// curV is now an older version: a stale holder's.
	cur, curV = b2, v2
	b3 := p.body()
	v3, err := p.b.Put(ctx, p.key, b3, v1)
	p.verdict("if-match", err, fmt.Sprintf("a write with %s naming an older %s", t.Match, t.Version))
	if err == nil {
		cur, curV = b3, v3
	}
	if !p.readBack(ctx, "if-match", cur, curV, false) {
		return
	}
	p.race(ctx, o)
}

// verdict adds the finding of a write that should have been refused.
func (p *prober) verdict(check string, err error, what string) {
	switch {
	case errors.Is(err, ErrConflict):
		p.add(check, SevOK, what+" was refused", "")
	case err == nil:
		p.add(check, SevCritical, what+" was ACCEPTED: the store ignores the condition, and fencing on it is unsafe", p.t.Unsafe)
	default:
		p.add(check, SevCritical, fmt.Sprintf("%s failed otherwise than by its condition: %v", what, err), p.t.Unsafe)
	}
}

// readBack reads the object and adds a critical finding unless it holds
// want at version (version "" is not compared). With ok, it adds a
// finding that it does. It reports whether the probe may go on.
func (p *prober) readBack(ctx context.Context, check string, want []byte, version string, ok bool) bool {
	got, v, err := p.b.Get(ctx, p.key, 0)
	switch {
	case err != nil:
		p.add(check, SevCritical, fmt.Sprintf("reading %s back failed: %v", p.key, err), "")
		return false
	case !bytes.Equal(got, want):
		p.add(check, SevCritical, fmt.Sprintf("reading %s back returned %q, not what was written last, %q: the store does not read its own writes at once, or ignored a condition", p.key, got, want),
			"use a store with strong read-after-write consistency")
		return false
	case version != "" && v != version:
		p.add(check, SevWarn, fmt.Sprintf("a read returned %s %s, the write that made the object %s: every fenced write will cost one more read", p.t.Version, v, version), "")
	case ok:
		p.add(check, SevOK, "a read right after the write returned what was written", "")
	}
	return true
}

// race runs o.Rounds rounds of o.Writers concurrent writes conditional
// on the current version, and wants exactly one to succeed each round.
func (p *prober) race(ctx context.Context, o ProbeOptions) {
	t := p.t
	worst := -1
	var detail string
	for round := range o.Rounds {
		_, v, err := p.b.Get(ctx, p.key, 0)
		if err != nil {
			p.add("race", SevCritical, fmt.Sprintf("reading %s failed: %v", p.key, err), "")
			return
		}
		bodies := make([][]byte, o.Writers)
		for i := range bodies {
			bodies[i] = p.body()
		}
		errs := make([]error, o.Writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range o.Writers {
			wg.Go(func() {
				<-start
				_, errs[i] = p.b.Put(ctx, p.key, bodies[i], v)
			})
		}
		close(start)
		wg.Wait()
		won := -1
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				won = i
			case !errors.Is(err, ErrConflict):
				p.add("race", SevCritical, fmt.Sprintf("a write with %s failed otherwise than by its condition: %v", t.Match, err), "")
				return
			}
		}
		if wins > 1 {
			p.add("race", SevCritical, fmt.Sprintf("round %d: %d of %d concurrent writes with %s naming the same %s were ACCEPTED: the store checks the condition apart from the write, and fencing on it is unsafe",
				round+1, wins, o.Writers, t.Match, t.Version), t.Unsafe)
			return
		}
		if wins == 1 {
			if !p.readBack(ctx, "race", bodies[won], "", false) {
				return
			}
		}
		if wins == 0 && worst < 0 {
			worst, detail = round+1, fmt.Sprintf("round %d: none of %d concurrent writes with %s naming the current %s succeeded (they all conflicted)", round+1, o.Writers, t.Match, t.Version)
		}
	}
	if worst > 0 {
		p.add("race", SevWarn, detail+": safe, but writers will retry more", "")
		return
	}
	p.add("race", SevOK, fmt.Sprintf("in each of %d rounds, exactly one of %d concurrent writes with %s naming the same %s succeeded", o.Rounds, o.Writers, t.Match, t.Version), "")
}

// cleanup deletes the probe's object, with a context of its own (for at
// most cleanupTimeout) if ctx has ended.
func (p *prober) cleanup(ctx context.Context) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
	}
	if err := p.b.Delete(ctx, p.key); err != nil {
		p.add("cleanup", SevWarn, fmt.Sprintf("deleting the probe's object %s failed: %v", p.key, err), "delete it by hand")
		return
	}
	p.add("cleanup", SevOK, fmt.Sprintf("deleted the probe's object %s", p.key), "")
}

const cleanupTimeout = 10 * time.Second

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

package quorum

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/errs"
	"github.com/fencelock/fencelock/internal/node"
)

// Ask sends ask to every node at once and hands each reply to take, on
// the caller's goroutine, until take reports the question decided, every
// node has answered, or ctx is done; it returns ctx's cause in the last
// case. Every question put to several nodes goes through Ask: a round of
// the protocol, and a read (who holds a lock, who leads an election).
//
// The requests run on a context bounded by timeout (none if 0), detached
// from ctx's cancellation if detach is set: the nodes that have not
// answered when the question is decided, or when ctx ends, still get
// them (a lock or token on more nodes than a bare majority survives more
// failures). The replies due after Ask returns are collected in the
// background, which then ends the requests' context.
//
// A single node's read (detach unset, one node) is asked on the caller's
// goroutine.
func Ask[R any](ctx context.Context, nodes []*node.Node, timeout time.Duration, detach bool,
	ask func(ctx context.Context, i int, n *node.Node) R, take func(i int, r R) (decided bool)) error {
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if detach {
		rctx = context.WithoutCancel(ctx)
	}
	if timeout > 0 {
		rctx, cancel = context.WithTimeout(rctx, timeout)
	}
	if len(nodes) == 1 && !detach {
		defer cancel()
		take(0, ask(rctx, 0, nodes[0]))
		return nil
	}
	type reply struct {
		i int
		r R
	}
	// Buffered for every reply: a request that ends after the decision
	// sends without anyone receiving.
	replies := make(chan reply, len(nodes))
	for i, n := range nodes {
		go func() { replies <- reply{i, ask(rctx, i, n)} }()
	}
	pending := len(nodes)
	var err error
	for decided := false; pending > 0 && !decided; {
		select {
		case r := <-replies:
			pending--
			decided = take(r.i, r.r)
		case <-ctx.Done():
			err = context.Cause(ctx)
			decided = true
		}
	}
	go func() {
		defer cancel()
		for range pending {
			<-replies
		}
	}()
	return err
}

// Tally is what a question's replies say: so many yes, so many no, the
// errors of the others.
type Tally struct {
	Yes, No int
	Errs    []error
}

// add counts one node's answer: an error, or yes or no.
func (t *Tally) add(i int, yes bool, err error) {
	switch {
	case err != nil:
		t.Errs = append(t.Errs, fmt.Errorf("node %d: %w", i, err))
	case yes:
		t.Yes++
	default:
		t.No++
	}
}

// Decision is what a tally decides of its majority question.
type Decision int

const (
	Undecided   Decision = iota // errors left it open: ErrNoQuorum
	MajorityYes                 // a majority answered yes
	MajorityNo                  // the refusals decide against
)

func (d Decision) String() string {
	return [...]string{"undecided", "yes", "no"}[d]
}

// Rule says what a refusal means to a question.
type Rule int

const (
	// Keeping asks whether something is still ours, or whose it is
	// (renew, release, proclaim, who holds or leads): no only when so
	// many refused that a majority cannot say yes, whatever the nodes
	// that failed hold.
	Keeping Rule = iota
	// Taking asks whether we could take something (acquire, write-back,
	// announce): any refusal means contention, worth waiting for, unless
	// the errors alone left too few nodes for a majority.
	Taking
)

// Majority is how many of n nodes make a majority.
func Majority(n int) int { return n/2 + 1 }

// Decide is the one majority rule: what t decides for n nodes.
func (t Tally) Decide(n int, r Rule) Decision {
	maj := Majority(n)
	switch {
	case t.Yes >= maj:
		return MajorityYes
	case r == Keeping && n-t.No < maj:
		return MajorityNo
	case r == Taking && t.No > 0 && n-len(t.Errs) >= maj:
		return MajorityNo
	}
	return Undecided
}

// over reports whether a question of n nodes asked by rule r needs no
// more replies: a majority said yes, or too few can still say it.
func (t Tally) over(n int) bool {
	maj := Majority(n)
	return t.Yes >= maj || n-t.No-len(t.Errs) < maj
}

// Outcome is what a Keeping question of n nodes answers: true when a
// majority said yes, false when so many said no that a majority cannot,
// and an error wrapping ErrNoQuorum (what: "renewed") when errors left it
// open.
func (t Tally) Outcome(n int, what string) (bool, error) {
	switch t.Decide(n, Keeping) {
	case MajorityYes:
		return true, nil
	case MajorityNo:
		return false, nil
	}
	return false, t.NoQuorum(n, what)
}

// NoQuorum is the error of a question of n nodes that errors left open:
// it wraps ErrNoQuorum and every node's error. what says what the yes
// answers did: "locked", "renewed", "read".
func (t Tally) NoQuorum(n int, what string) error {
	return fmt.Errorf("%w: %s on %d of %d nodes, %d needed: %w",
		errs.ErrNoQuorum, what, t.Yes, n, Majority(n), errs.Join(t.Errs...))
}

// Vote counts n nodes' answers to "who holds it": view(i) is node i's
// error, or the key it votes for, or no vote (nobody holds it there). It
// returns the key with the most votes and the tally of "does it hold":
// yes its votes, no the other nodes that answered, as a Keeping question.
func Vote[K comparable](n int, view func(i int) (k K, voted bool, err error)) (K, Tally) {
	votes := map[K]int{}
	var t Tally
	var winner K
	for i := range n {
		k, voted, err := view(i)
		if err != nil {
			t.add(i, false, err)
			continue
		}
		if !voted {
			continue
		}
		if votes[k]++; votes[k] > t.Yes {
			t.Yes, winner = votes[k], k
		}
	}
	t.No = n - len(t.Errs) - t.Yes
	return winner, t
}

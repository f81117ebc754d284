package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/fencelock/fencelock"
)

const statusAbout = `Show who holds the lock NAME: the holder's public lease ID, the lock's
remaining TTL, and the holder's token (the last issued for NAME). It
never shows the holder's secret.

A semaphore NAME (one that records its number of permits, N, at its
first permit) is shown as its permits: each slot, 0 to N-1, held or
free, with its fence name, and for a held one its holder's lease ID,
remaining TTL and token, as for a lock; --permits N shows N slots. A lock
or slot kept by the lock-delay of a lease that expired without a release
is shown as not held, with the delay left and that lease.`

const statusExits = `  0    success, whether or not the lock (or a permit) is held
  2    usage error: bad flags, arguments or environment
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

// lockStatus is what status prints of a lock.
type lockStatus struct {
	Name string `json:"name"`
	heldStatus
}

// semaphoreStatus is what status --permits prints: every slot below
// Permits, slot 0 first.
type semaphoreStatus struct {
	Name    string         `json:"name"`
	Permits int            `json:"permits"`
	Free    int            `json:"free"`
	Slots   []permitStatus `json:"slots"`
}

// permitStatus is one slot of a semaphore; Fence is its fence name.
type permitStatus struct {
	Slot  int    `json:"slot"`
	Fence string `json:"fence"`
	heldStatus
}

// heldStatus is who holds a lock or a slot, if anyone does, or which
// lease's lock-delay keeps it unavailable.
type heldStatus struct {
	Held    bool   `json:"held"`
	Lease   string `json:"lease,omitempty"`
	TTLms   int64  `json:"ttl_ms,omitempty"`   // -1: the key has no expiry
	Token   int64  `json:"token,omitempty"`    // the holder's; 0 if its counter is gone
	DelayMs int64  `json:"delay_ms,omitempty"` // not held, but kept by Lease's lock-delay this long
}

func newHeldStatus(h fencelock.Holder) heldStatus {
	if h.Delay > 0 {
		return heldStatus{Lease: h.LeaseID, Token: h.Token, DelayMs: max(h.Delay.Milliseconds(), 1)}
	}
	st := heldStatus{Held: true, Lease: h.LeaseID, Token: h.Token, TTLms: h.TTL.Milliseconds()}
	if h.TTL < 0 {
		st.TTLms = -1
	}
	return st
}

// text returns the status's fields as status prints them: "-" for what
// a free lock or slot lacks.
func (st heldStatus) text(noTTL string) (held, lease, ttl, token string) {
	if st.DelayMs > 0 {
		delay := time.Duration(st.DelayMs) * time.Millisecond
		return fmt.Sprintf("no (lock-delay: %v left, its lease expired without a release)", delay),
			st.Lease, "-", strconv.FormatInt(st.Token, 10)
	}
	if !st.Held {
		return "no", "-", "-", "-"
	}
	ttl = (time.Duration(st.TTLms) * time.Millisecond).String()
	if st.TTLms < 0 {
		ttl = noTTL
	}
	token = "unknown (its counter is gone)"
	if st.Token > 0 {
		token = strconv.FormatInt(st.Token, 10)
	}
	return "yes", st.Lease, ttl, token
}

func (c *cli) status(ctx context.Context, args []string) int {
	var (
		cn      conn
		asJSON  bool
		permits int
	)
	cmd := c.command("status", "[flags] NAME", statusAbout, statusExits)
	cn.addConn(cmd)
	cmd.fs.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.addPermits(&permits, "show the `n` permits of the semaphore NAME instead of the lock NAME")
	name, rdb, code := c.dialName(ctx, cmd, &cn, args)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	rctx, cancel := cn.request(ctx)
	defer cancel()
	locks := cn.locks(rdb, false)
	if permits == 0 {
		// A semaphore records its number of permits: NAME is one.
		n, err := locks.Permits(rctx, name)
		if err != nil {
			return c.fail("status", exitInternal, err)
		}
		permits = n
	}
	if permits > 0 {
		return c.semaphoreStatus(rctx, locks.Semaphore(name, permits), asJSON)
	}
	st := lockStatus{Name: name}
	h, err := locks.Holder(rctx, name)
	switch {
	case err == nil:
		st.heldStatus = newHeldStatus(h)
	case !errors.Is(err, fencelock.ErrNotHeld):
		return c.fail("status", exitInternal, err)
	}
	if asJSON {
		b, _ := json.Marshal(st)
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	held, lease, ttl, token := st.text("none (the lock never expires: it was not set by fencelock)")
	fmt.Fprintf(c.stdout, "lock   %s\nheld   %s\nlease  %s\nttl    %s\ntoken  %s\n", st.Name, held, lease, ttl, token)
	return exitOK
}

// semaphoreStatus prints the slots of sem, one line each.
func (c *cli) semaphoreStatus(ctx context.Context, sem *fencelock.Semaphore, asJSON bool) int {
	hs, err := sem.Holders(ctx)
	if err != nil {
		return c.fail("status", exitInternal, err)
	}
	st := semaphoreStatus{Name: sem.Name(), Permits: sem.Permits(), Free: sem.Permits() - len(hs), Slots: make([]permitStatus, sem.Permits())}
	for i := range st.Slots {
		st.Slots[i] = permitStatus{Slot: i, Fence: fencelock.SlotName(sem.Name(), i)}
	}
	for _, h := range hs {
		st.Slots[h.Slot].heldStatus = newHeldStatus(h.Holder)
	}
	if asJSON {
		b, _ := json.Marshal(st)
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "semaphore  %s\npermits    %d, %d free\n", st.Name, st.Permits, st.Free)
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "slot\theld\tlease\tttl\ttoken\tfence")
	for _, p := range st.Slots {
		held, lease, ttl, token := p.text("none")
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", p.Slot, held, lease, ttl, token, p.Fence)
	}
	tw.Flush()
	return exitOK
}

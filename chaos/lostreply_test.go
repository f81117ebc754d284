package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLostReply drops the replies of a holder's lock commands after the
// server ran them, for 5–7 TTLs from its read of the counter: its
// renewals extend the lock but it never hears so (its lease is lost at its
// deadline, another holder takes the lock once the key expires, and the
// victim writes afterwards), its release runs unheard, and its next
// acquisitions take the lock and are abandoned (Acquire's compare-and-
// delete with the attempt's owner). Outside those windows, one in four
// acquisitions that took the lock loses its reply too, on every holder.
// Besides the usual invariants, no
// acquisition whose reply was lost may leave the lock held: each one must
// be followed by a release with its owner value that ran, and the key must
// not hold that owner once the release ran.
func TestLostReply(t *testing.T) {
	skipOnTransport(t, skipHooked)
	runScenario(t, lostReplyScenario("lost-reply", nil, false))
}

// TestLostReplyRetried is TestLostReply where each dropped reply is
// followed by go-redis's retry of the request, and the retry fails: the
// client sees what a retry that reached a replica (READONLY) or a server
// that refused the connection returns, not the timeout. Such an error says
// that the last try did not run, nothing of the first, which did: the
// acquisitions must be released all the same.
func TestLostReplyRetried(t *testing.T) {
	skipOnTransport(t, skipHooked)
	runScenario(t, lostReplyScenario("lost-reply-retried", func(r *rand.Rand) error {
		if r.IntN(2) == 0 {
			return errRetryReadOnly
		}
		return errRetryRefused
	}, false))
}

// The errors of a go-redis retry that failed, after a dropped reply.
var (
	errRetryReadOnly error = retryReply("READONLY You can't write against a read only replica.")
	errRetryRefused  error = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
)

// retryReply is an error reply, as go-redis returns one.
type retryReply string

func (e retryReply) Error() string { return string(e) }
func (retryReply) RedisError()     {}

// lostReplyScenario is TestLostReply's scenario; retried, if not nil,
// picks the error of the failed retry that follows each dropped reply.
// shared gives every holder but the first the same Client, and so the
// same connection pool and hook: their calls go in batches, and a fault
// injected for one of them drops the replies of all of them, while the
// first holder, alone, can take the lock meanwhile.
func lostReplyScenario(name string, retried func(*rand.Rand) error, shared bool) scenario {
	return scenario{name: name, adapter: "memory", shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		srv := redistest.New(t)
		admin := srv.Client(t)
		lr := &lostReplies{admin: admin, retried: retried}
		clients := make([]*fencelock.Client, holderCount)
		for i := range holderCount {
			if shared && i > 1 {
				clients[i] = clients[1]
				lr.hooks = append(lr.hooks, lr.hooks[1])
				continue
			}
			rdb := redis.NewClient(redisOptions(srv.Addr()))
			t.Cleanup(func() { rdb.Close() })
			h := &dropHook{lr: lr, client: i}
			lr.hooks = append(lr.hooks, h)
			rdb.AddHook(h)
			clients[i] = lockClient(t, rdb)
		}
		t.Cleanup(func() { lr.requireEveryKind(t) })
		return &world{
			lock: func(i int) *fencelock.Client { return clients[i] },
			resource: func(r *run) (*chaos.Journal, func(int) fence.Store) {
				lr.reset(r.seed)
				return memoryResource(r)
			},
			holders: goroutineHolders,
			nemesis: targeted(fault{
				longOnly: true,
				hold:     func(r *rand.Rand) time.Duration { return between(r, 5, 7) },
				inject:   func(t *testing.T, v int) { lr.hooks[v].setDropping(true) },
				heal:     func(t *testing.T, v int) { lr.hooks[v].setDropping(false) },
			}),
			settle: lr.settle,
		}
	}}
}

// errReplyLost is what a holder's client sees instead of a reply the
// server sent: a timeout, as when the reply is lost on the way.
var errReplyLost = fmt.Errorf("chaos: reply lost: %w", os.ErrDeadlineExceeded)

// lostReplies tracks, across a run, the acquisitions whose replies were
// lost and whether each was released.
type lostReplies struct {
	admin   *redis.Client
	hooks   []*dropHook
	retried func(*rand.Rand) error // nil: a dropped reply is a timeout

	mu sync.Mutex
	// pending maps the owner value of each acquisition that took the
	// lock but whose reply was lost to its lock key, until a release with
	// that owner ran and the key no longer held it.
	pending map[string]pendingAcquire
	// dropped counts the replies dropped by kind, over the test.
	dropped map[string]int
	// rand decides which acquisitions outside the targeted windows lose
	// their replies; seeded per run.
	rand *rand.Rand
	// worst is the longest time from a lost acquire reply to the release
	// that freed the lock, over the test.
	worst time.Duration
}

type pendingAcquire struct {
	key  string
	lost time.Time
}

// reset starts a run.
func (lr *lostReplies) reset(seed uint64) {
	lr.mu.Lock()
	lr.rand = rand.New(rand.NewPCG(seed, 99))
	lr.mu.Unlock()
}

// dropTaken decides whether an acquisition that took the lock outside a
// targeted window loses its reply.
func (lr *lostReplies) dropTaken(cmd redis.Cmder) bool {
	if _, ok := taken(cmd); !ok || lockCommand(cmd) != "acquire" {
		return false
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.rand != nil && lr.rand.IntN(4) == 0
}

// settle checks the run just ended: every lost acquisition was released.
// A holder stopped at the run's end returns from Acquire with its context
// done while the release of an acquisition whose reply was just lost
// still runs (node.abandon lets it finish in the background, bounded by
// a second): settle waits for such releases, well past that bound, before
// it calls one missing.
func (lr *lostReplies) settle(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		lr.mu.Lock()
		n := len(lr.pending)
		lr.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	for owner, p := range lr.pending {
		v, err := lr.admin.Get(context.Background(), p.key).Result()
		held := err == nil && v == owner
		t.Errorf("lost-reply: the acquisition of %s whose reply was lost %v ago was never released by its client (lock still held by it: %t), want a compare-and-delete before Acquire returns",
			p.key, time.Since(p.lost).Round(time.Millisecond), held)
	}
	clear(lr.pending)
}

// requireEveryKind fails unless the test dropped the replies of
// acquisitions that took the lock, renewals and releases: otherwise it
// proved nothing about them. Only in short mode's or long mode's full
// runs, not a one-seed replay.
func (lr *lostReplies) requireEveryKind(t *testing.T) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	line := fmt.Sprintf("lost-reply: replies dropped by kind: %v; longest from a lost acquire reply to its release: %v", lr.dropped, lr.worst)
	t.Log(line)
	if *runsFlag > 0 {
		fmt.Println(line)
	}
	if *seedFlag != 0 || t.Failed() {
		return
	}
	for _, k := range []string{"acquire-taken", "renew", "release"} {
		if lr.dropped[k] == 0 {
			t.Errorf("lost-reply: no %s reply was dropped in any run (dropped: %v), want each kind at least once", k, lr.dropped)
		}
	}
}

// dropHook is a go-redis hook on one holder's lock client that, while
// dropping, lets each lock command run at the server and then replaces
// its reply with errReplyLost.
type dropHook struct {
	lr     *lostReplies
	client int

	mu       sync.Mutex
	dropping bool
}

func (h *dropHook) setDropping(on bool) {
	h.mu.Lock()
	h.dropping = on
	h.mu.Unlock()
}

func (h *dropHook) isDropping() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropping
}

func (h *dropHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dropHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.lr.ran(cmd, err)
		if err != nil || !h.isDropping() && !h.lr.dropTaken(cmd) {
			return err
		}
		kind := lockCommand(cmd)
		if kind == "" {
			return err
		}
		h.lr.drop(cmd, kind)
		lost := h.lr.lostError()
		cmd.SetErr(lost)
		return lost
	}
}

func (h *dropHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.lr.ran(cmd, cmd.Err())
		}
		if err != nil {
			return err
		}
		if !h.isDropping() {
			// A batch that carries an acquisition which took the lock
			// loses its reply, as a lone one does: the whole batch's.
			taken := false
			for _, cmd := range cmds {
				taken = h.lr.dropTaken(cmd) || taken
			}
			if !taken {
				return err
			}
		}
		kind := ""
		for _, cmd := range cmds {
			if k := lockCommand(cmd); k != "" {
				kind = k
				h.lr.drop(cmd, k)
			}
		}
		if kind == "" {
			return err
		}
		lost := h.lr.lostError()
		for _, cmd := range cmds {
			cmd.SetErr(lost)
		}
		return lost
	}
}

// lostError returns what the client sees instead of a dropped reply: the
// timeout, or the error of go-redis's retry that failed.
func (lr *lostReplies) lostError() error {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.retried == nil || lr.rand == nil {
		return errReplyLost
	}
	return lr.retried(lr.rand)
}

// drop records a reply about to be dropped: an acquisition that took
// the lock becomes pending until its release runs.
func (lr *lostReplies) drop(cmd redis.Cmder, kind string) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.dropped == nil {
		lr.dropped, lr.pending = map[string]int{}, map[string]pendingAcquire{}
	}
	if kind == "acquire" {
		if slot, ok := taken(cmd); ok {
			kind = "acquire-taken"
			// EVALSHA sha numkeys KEYS... ARGV...: a lock's owner is its
			// ARGV[1]; a permit's (lua/semaphore.lua) is its ARGV[3], and
			// its lock key that of the slot it took.
			args := cmd.Args()
			owner, key := args[3+acquireKeys], args[3]
			if slot >= 0 {
				keys, _ := strconv.Atoi(argString(args[2]))
				owner, key = args[3+keys+2], args[3+acquireKeys*slot]
			}
			lr.pending[argString(owner)] = pendingAcquire{key: argString(key), lost: time.Now()}
		}
	}
	lr.dropped[kind]++
}

// ran notes a command the server answered: a release (Lua or native)
// with a pending acquisition's owner clears it, once the key no longer
// holds that owner.
func (lr *lostReplies) ran(cmd redis.Cmder, err error) {
	if err != nil || lockCommand(cmd) != "release" {
		return
	}
	args := cmd.Args()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	for _, a := range args[2:] {
		owner := argString(a)
		p, ok := lr.pending[owner]
		if !ok {
			continue
		}
		if v, err := lr.admin.Get(context.Background(), p.key).Result(); err == nil && v == owner {
			continue // still held: the release did not free it
		}
		lr.worst = max(lr.worst, time.Since(p.lost))
		delete(lr.pending, owner)
	}
}

// acquireKeys and acquireArgs are lua/acquire.lua's shape: KEYS lock,
// token and lock-delay; ARGV owner, ttl, token expiry, proposal, delay.
const acquireKeys, acquireArgs = 3, 5

// lockCommand classifies a holder's lock command: "acquire", "renew" or
// "release", or "" for anything else (a wake-up subscription, COMMAND
// INFO). Scripts are told apart by their shape (lua/acquire.lua: 3 keys, 5
// arguments; lua/renew.lua: 3 keys, 4; lua/release.lua: 2 keys, or 1 and
// 3 arguments; a semaphore's of N permits, lua/semaphore.lua: 3N + 1 keys, 2 + 5 arguments,
// lua/semaphore_release.lua: 2N keys, 3 arguments), natives by name.
func lockCommand(cmd redis.Cmder) string {
	args := cmd.Args()
	switch strings.ToLower(cmd.Name()) {
	case "evalsha", "eval":
		if len(args) < 3 {
			return ""
		}
		keys, err := strconv.Atoi(argString(args[2]))
		if err != nil {
			return ""
		}
		switch {
		case keys == acquireKeys && len(args) == 3+acquireKeys+acquireArgs:
			return "acquire"
		case keys == 3 && len(args) == 10:
			return "renew"
		case keys == 2, keys == 1 && len(args) == 3+1+3:
			return "release" // with its lock-delay key or without
		case keys%acquireKeys == 1 && len(args) == 3+keys+2+acquireArgs:
			return "acquire" // a permit's: every slot's keys, then the permits key
		case keys%2 == 0 && len(args) == 3+keys+3:
			return "release" // whatever permit an owner holds
		}
	case "set":
		for _, a := range args {
			if strings.EqualFold(argString(a), "ifeq") {
				return "renew"
			}
		}
	case "delex", "delifeq":
		return "release"
	}
	return ""
}

// taken reports whether an acquisition's reply says it took the lock or
// a permit, and the permit's slot (-1 for a lock).
func taken(cmd redis.Cmder) (slot int, ok bool) {
	switch c := cmd.(type) {
	case *redis.IntCmd:
		return -1, c.Val() > 0
	case *redis.Cmd:
		// lua/semaphore.lua's {slot, reply}.
		r, _ := c.Val().([]any)
		if len(r) != 2 {
			return 0, false
		}
		i, ok1 := r[0].(int64)
		token, ok2 := r[1].(int64)
		return int(i), ok1 && ok2 && i >= 0 && token > 0
	}
	return 0, false
}

// argString returns a command argument as text: the library passes some
// as pointers to strings it reuses.
func argString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case *string:
		return *v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(a)
}

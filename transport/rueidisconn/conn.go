// Package rueidisconn runs fencelock over rueidis: New and NewQuorum take
// rueidis clients (standalone, Sentinel or Cluster, as rueidis.NewClient
// makes them) where fencelock.New and NewQuorum take go-redis ones. The
// Client is the same in every other way.
//
// rueidis pipelines the commands of concurrent callers by itself, on
// connections whose writes and reads overlap. Outside a Cluster the
// library still gathers concurrent calls into batches of its own, each
// sent as one DoMulti (two in flight at a time): a batch costs both sides
// about half the CPU per call that as many separate requests do. On a
// Cluster, whose masters rueidis does not name, each call is sent as it
// comes and rueidis pipelines it.
//
// The client must be made with rueidis's defaults for retries (a command
// that is not read-only is not retried), and every request ends at its
// context's deadline. On a Cluster, MinReplicas sends WAIT on a dedicated
// connection to the lock's master.
//
// rueidis spreads keys over several connections by default, each dialed
// at its first request, inside that request's deadline: with TTLs of a
// few hundred milliseconds, whose deadlines a dial under load can spend,
// make the client with PipelineMultiplex -1 (one connection, dialed when
// the client is made). An ACL user needs more than the library's rule
// (docs/topologies.md): ForceSingleClient spares a standalone server
// CLUSTER SLOTS, and ClientSetInfo DisableClientSetInfo spares CLIENT
// SETINFO.
package rueidisconn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/transport"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// New returns a fencelock Client that keeps its locks on the deployment
// client reaches (see fencelock.New; opts are the same).
func New(client rueidis.Client, opts *fencelock.Options) *fencelock.Client {
	return fencelock.NewTransport(Conn(client), opts)
}

// NewQuorum returns a fencelock Client that keeps each lock on a majority
// of independent masters, one client each (see fencelock.NewQuorum).
func NewQuorum(clients []rueidis.Client, opts *fencelock.Options) *fencelock.Client {
	conns := make([]transport.Conn, len(clients))
	for i, c := range clients {
		conns[i] = Conn(c)
	}
	return fencelock.NewQuorumTransport(conns, opts)
}

// Conn returns the transport of client; nil for a nil client.
func Conn(client rueidis.Client) transport.Conn {
	if client == nil {
		return nil
	}
	return &conn{c: client, cluster: client.Mode() == rueidis.ClientModeCluster}
}

type conn struct {
	c       rueidis.Client
	cluster bool
	pinned  bool // a Cluster master's for WAIT: a pipeline goes on one dedicated connection
}

func (t *conn) Process(ctx context.Context, cmd redis.Cmder) error {
	return fill(cmd, t.c.Do(ctx, t.build(cmd)))
}

func (t *conn) Pipeline(ctx context.Context, cmds ...redis.Cmder) error {
	built := make(rueidis.Commands, len(cmds))
	for i, cmd := range cmds {
		built[i] = t.build(cmd)
	}
	var rs []rueidis.RedisResult
	if t.pinned {
		// WAIT names no key: on a Cluster it must follow the write on the
		// write's own connection, which a dedicated one is.
		err := t.c.Dedicated(func(d rueidis.DedicatedClient) error {
			rs = d.DoMulti(ctx, built...)
			return nil
		})
		if err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
	} else {
		rs = t.c.DoMulti(ctx, built...)
	}
	var first error
	for i, r := range rs {
		if err := fill(cmds[i], r); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Master returns a Conn whose pipelines go on one dedicated connection on
// a Cluster (for WAIT), and "": rueidis does not say which master serves
// a key, so the library detects the native commands once for the whole
// deployment (a refused one falls back to Lua on any master).
func (t *conn) Master(ctx context.Context, key string) (string, transport.Conn, error) {
	if !t.cluster {
		return "", t, nil
	}
	return "", &conn{c: t.c, cluster: true, pinned: true}, nil
}

func (t *conn) Cluster() bool { return t.cluster }

// Reload does nothing: rueidis follows MOVED and failovers by itself.
func (t *conn) Reload(context.Context) {}

// Connected reports true: rueidis does not tell whether it holds a
// connection.
func (t *conn) Connected() bool { return true }

// Pipelines reports false outside a Cluster, so that the library's
// batcher sends concurrent calls together in one DoMulti: rueidis would
// pipeline them too, as separate requests, which cost both sides about
// twice the CPU per call of a batch (bench/README, 2026-12-05). On a
// Cluster rueidis routes each call by its key, so calls go as they come.
func (t *conn) Pipelines() bool { return t.cluster }

// build makes cmd a rueidis command, with its keys marked for a Cluster's
// routing.
func (t *conn) build(cmd redis.Cmder) rueidis.Completed {
	args := cmd.Args()
	// The words stay on the stack for the commands the library sends:
	// the builder copies them into its own pooled slice.
	var buf [16]string
	s := buf[:0]
	for _, a := range args {
		s = append(s, text(a))
	}
	// The library names its commands in lower case (go-redis's way);
	// rueidis upper-cases a name to check it, which would allocate.
	if up, ok := upperNames[s[0]]; ok {
		s[0] = up
	}
	k := keys(s)
	b := t.c.B().Arbitrary(s[:k.from]...)
	if k.n > 0 {
		b = b.Keys(s[k.from : k.from+k.n]...)
	}
	return b.Args(s[k.from+k.n:]...).Build()
}

// upperNames are the upper-case names of the commands the library sends
// in lower case.
var upperNames = map[string]string{
	"evalsha": "EVALSHA", "eval": "EVAL", "get": "GET", "set": "SET",
	"pexpire": "PEXPIRE", "publish": "PUBLISH", "spublish": "SPUBLISH",
}

// span is where a command's keys are among its words: n of them from
// from, which is where the arguments that are not the command's name
// start when it has none.
type span struct{ from, n int }

// keys says which of a command's words are keys, for the commands the
// library sends: a script's KEYS, the key of a one-key command, a sharded
// channel; none for PUBLISH, WAIT and COMMAND.
func keys(s []string) span {
	name := s[0]
	switch {
	case strings.EqualFold(name, "EVALSHA"), strings.EqualFold(name, "EVAL"):
		n, err := strconv.Atoi(s[2])
		if err != nil || n < 0 || 3+n > len(s) {
			return span{from: 1}
		}
		return span{from: 3, n: n}
	case len(s) < 2, strings.EqualFold(name, "PUBLISH"), strings.EqualFold(name, "WAIT"),
		strings.EqualFold(name, "COMMAND"), strings.EqualFold(name, "CLIENT"), strings.EqualFold(name, "PING"):
		return span{from: 1}
	}
	return span{from: 1, n: 1} // GET, SET, PEXPIRE, DELEX, DELIFEQ, SPUBLISH
}

// text writes an argument as go-redis's writer does, for the types the
// library sends.
func text(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case *string:
		return *v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case *int64:
		return strconv.FormatInt(*v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	}
	return fmt.Sprint(a)
}

// replyError is an error reply, as go-redis makes one: its text is the
// server's, and redis.HasErrorPrefix reads its first word.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// fill sets cmd's reply from r, as go-redis would have: a nil reply is
// redis.Nil, an error reply a redis.Error. It returns cmd's error.
func fill(cmd redis.Cmder, r rueidis.RedisResult) error {
	if err := r.Error(); err != nil {
		var rerr *rueidis.RedisError
		switch {
		case rueidis.IsRedisNil(err):
			err = redis.Nil
		case errors.As(err, &rerr):
			err = replyError(rerr.Error())
		}
		cmd.SetErr(err)
		return err
	}
	msg, _ := r.ToMessage()
	// The replies the library reads most, an integer or a string into a
	// command of that type, are set without boxing them as value does.
	switch c := cmd.(type) {
	case *redis.IntCmd:
		if msg.IsInt64() {
			n, _ := msg.AsInt64()
			c.SetVal(n)
			return nil
		}
	case *redis.StringCmd:
		if msg.IsString() {
			v, _ := msg.ToString()
			c.SetVal(v)
			return nil
		}
	case *redis.StatusCmd:
		if msg.IsString() {
			v, _ := msg.ToString()
			c.SetVal(v)
			return nil
		}
	}
	v, err := value(&msg)
	if err != nil {
		cmd.SetErr(err)
		return err
	}
	switch c := cmd.(type) {
	case *redis.IntCmd:
		n, ok := v.(int64)
		if !ok {
			return bad(cmd, v)
		}
		c.SetVal(n)
	case *redis.BoolCmd:
		n, ok := v.(int64)
		if !ok {
			return bad(cmd, v)
		}
		c.SetVal(n == 1)
	case *redis.StatusCmd:
		s, ok := v.(string)
		if !ok {
			return bad(cmd, v)
		}
		c.SetVal(s)
	case *redis.StringCmd:
		s, ok := v.(string)
		if !ok {
			return bad(cmd, v)
		}
		c.SetVal(s)
	case *redis.SliceCmd:
		a, ok := v.([]any)
		if !ok {
			return bad(cmd, v)
		}
		c.SetVal(a)
	case *redis.Cmd:
		c.SetVal(v)
	default:
		return bad(cmd, v)
	}
	return nil
}

// bad fails cmd with a reply of a type it cannot hold.
func bad(cmd redis.Cmder, v any) error {
	err := fmt.Errorf("rueidisconn: %s: reply of type %T", cmd.Name(), v)
	cmd.SetErr(err)
	return err
}

// value returns m as go-redis returns replies: nil, a string, an int64, a
// []any (arrays, sets and maps' pairs), or an error reply inside an array.
func value(m *rueidis.RedisMessage) (any, error) {
	switch {
	case m.IsNil():
		return nil, nil
	case m.IsInt64():
		return m.AsInt64()
	case m.IsString():
		return m.ToString()
	case m.IsBool():
		b, err := m.AsBool()
		if b {
			return int64(1), err
		}
		return nil, err
	case m.IsArray():
		es, err := m.ToArray()
		if err != nil {
			return nil, err
		}
		return values(es)
	case m.IsMap():
		// ToArray refuses a map (COMMAND INFO's key specifications are
		// maps in RESP3): its pairs, key then value, ordered by key.
		kv, err := m.AsMap()
		if err != nil {
			return nil, err
		}
		keys := slices.Sorted(maps.Keys(kv))
		es := make([]rueidis.RedisMessage, 0, 2*len(kv))
		out := make([]any, 0, 2*len(kv))
		for _, k := range keys {
			es = append(es, kv[k])
		}
		vs, err := values(es)
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			out = append(out, k, vs[i])
		}
		return out, nil
	}
	return m.ToAny()
}

// values returns es as value does, an error reply among them as a
// replyError, a nil one as nil.
func values(es []rueidis.RedisMessage) ([]any, error) {
	out := make([]any, len(es))
	for i := range es {
		if es[i].IsNil() { // Error says redis.Nil: a nil element is no error
			continue
		}
		if err := es[i].Error(); err != nil {
			out[i] = replyError(err.Error())
			continue
		}
		var err error
		if out[i], err = value(&es[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

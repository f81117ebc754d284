package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/fencelock/fencelock"
)

const leaderAbout = `Show who leads the election NAME: the value the leader announced, its
term, its public lease ID and since when it leads (by its own clock).
It never shows the leader's secret.

With --watch, print the leader now, then a line for every change, in
term order, until interrupted: each new term, each new value a leader
announces, and "no leader" when a leadership ends without a successor
yet. Changes come from the election's own notifications, not polling;
errors reading Redis are reported on stderr and retried.`

const leaderExits = `  0    the election has a leader (with --watch: interrupted)
  1    nobody leads the election
  2    usage error: bad flags, arguments or environment
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

// leaderInfo is what leader prints.
type leaderInfo struct {
	Election string    `json:"election"`
	Leader   bool      `json:"leader"`
	Value    string    `json:"value,omitempty"`
	Term     int64     `json:"term,omitempty"`
	Lease    string    `json:"lease,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

func newLeaderInfo(name string, l fencelock.Leader) leaderInfo {
	if l.Term == 0 {
		return leaderInfo{Election: name}
	}
	return leaderInfo{Election: name, Leader: true, Value: l.Value, Term: l.Term, Lease: l.LeaseID, Since: l.Since}
}

func (c *cli) leader(ctx context.Context, args []string) int {
	var (
		cn            conn
		asJSON, watch bool
	)
	cmd := c.command("leader", "[flags] NAME", leaderAbout, leaderExits)
	cn.addConn(cmd)
	cmd.fs.BoolVar(&asJSON, "json", false, "print JSON (with --watch, one object per line)")
	cmd.fs.BoolVar(&watch, "watch", false, "print every change of leader until interrupted")
	name, rdb, code := c.dialName(ctx, cmd, &cn, args)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	opts := &fencelock.Options{Prefix: cn.prefix, RenewInterval: -1,
		// Observe retries what fails; the user should see why it waits.
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{
			Level:       slog.LevelWarn,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
		}))}
	e := fencelock.New(rdb, opts).Election(name)

	if !watch {
		rctx, cancel := cn.request(ctx)
		defer cancel()
		l, err := e.Leader(rctx)
		if err != nil && !errors.Is(err, fencelock.ErrNoLeader) {
			return c.fail("leader", exitInternal, err)
		}
		info := newLeaderInfo(name, l)
		if asJSON {
			printJSON(c.stdout, info)
		} else if !info.Leader {
			fmt.Fprintf(c.stdout, "election  %s\nleader    none\n", name)
		} else {
			fmt.Fprintf(c.stdout, "election  %s\nleader    %s\nterm      %d\nlease     %s\nsince     %s (%v ago)\n",
				name, printable(info.Value), info.Term, info.Lease, info.Since.Format(time.RFC3339Nano), time.Since(info.Since).Round(time.Millisecond))
		}
		if !info.Leader {
			return exitNoLeader
		}
		return exitOK
	}

	ctx, stop := c.untilInterrupted(ctx)
	defer stop()
	changes, err := e.Observe(ctx)
	if err != nil {
		return c.fail("leader", exitInternal, err)
	}
	for l := range changes {
		info := newLeaderInfo(name, l)
		switch {
		case asJSON:
			printJSON(c.stdout, info)
		case !info.Leader:
			fmt.Fprintln(c.stdout, "no leader")
		default:
			fmt.Fprintf(c.stdout, "term=%d lease=%s since=%s value=%s\n", info.Term, info.Lease, info.Since.Format(time.RFC3339Nano), strconv.Quote(info.Value))
		}
	}
	return exitOK // the channel closes when ctx ends: interrupted
}

func printJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}

// printable returns s as is if it prints on one line, else quoted.
func printable(s string) string {
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// dropTime removes the time from log records on stderr: a terminal or a
// service manager's journal times them already.
func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Command bench compares fencelock with its peers (go-redsync/redsync,
// bsm/redislock) and with the bare minimum an owner-checked Redis lock
// must send (the "floor"), on redis-server processes it starts itself.
// See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg := defaultConfig()
	quick := flag.Bool("quick", false, "a fast, rough run: 1 repetition, short scenarios")
	flag.IntVar(&cfg.reps, "reps", cfg.reps, "repetitions of every scenario; figures are medians")
	flag.DurationVar(&cfg.dur, "dur", cfg.dur, "length of one uncontended or parallel run")
	flag.DurationVar(&cfg.contDur, "contended-dur", cfg.contDur, "length of one contended run")
	flag.IntVar(&cfg.goroutines, "goroutines", cfg.goroutines, "goroutines in the parallel and contended scenarios")
	flag.DurationVar(&cfg.hold, "hold", cfg.hold, "how long a contended holder keeps the lock")
	flag.DurationVar(&cfg.think, "think", cfg.think, "pause after a contended release before wanting the lock again")
	flag.IntVar(&cfg.rtOps, "rt-ops", cfg.rtOps, "operations measured per contestant in the round-trip scenario")
	scen := flag.String("scenarios", "1,2,3,4,6", "scenarios to run: 1 uncontended, 2 parallel, 3 contended, 4 round trips, 5 server cost per redis.call, 6 quorum, 7 scaling with goroutines, 8 handoff with waiters, 9 held leases")
	all := flag.Bool("all", false, "run every scenario (1-9) and write the plots (-plots)")
	flag.StringVar(&cfg.plots, "plots", cfg.plots, "directory for the PNG plots of scenarios 7, 8 and 9; empty for none")
	flag.DurationVar(&cfg.heldWindow, "held-window", cfg.heldWindow, "how long scenario 9 measures the keeping of held leases")
	only := flag.String("only", "", "regexp: run only the contestants whose name matches (the floor always runs)")
	flag.Parse()
	if *quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		cfg.quick(set)
	}
	cfg.scenarios = map[string]bool{}
	if *all {
		*scen = "1,2,3,4,5,6,7,8,9"
	}
	for s := range strings.SplitSeq(*scen, ",") {
		cfg.scenarios[strings.TrimSpace(s)] = true
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -only:", err)
			os.Exit(2)
		}
		cfg.only = re
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	rep.markdown(os.Stdout)
	if cfg.plots != "" {
		if err := rep.plot(cfg.plots); err != nil {
			fmt.Fprintln(os.Stderr, "bench: plots:", err)
			os.Exit(1)
		}
	}
}

type config struct {
	reps         int
	dur, contDur time.Duration
	goroutines   int
	hold, think  time.Duration
	rtOps        int
	maxOps       int // per goroutine and run, a bound besides time
	scenarios    map[string]bool
	only         *regexp.Regexp
	warmPairs    int

	scaleGoroutines []int         // scenario 7
	waiters         []int         // scenario 8
	held            []int         // scenario 9
	heldWindow      time.Duration // scenario 9
	plots           string        // directory for PNGs
}

func defaultConfig() config {
	return config{
		reps:       5,
		dur:        time.Second,
		contDur:    2 * time.Second,
		goroutines: 16,
		hold:       0,
		think:      0,
		rtOps:      200,
		maxOps:     1 << 20,
		warmPairs:  20,
		scenarios:  map[string]bool{"1": true, "2": true, "3": true, "4": true, "6": true},

		scaleGoroutines: []int{1, 4, 16, 64, 256},
		waiters:         []int{1, 10, 100, 1000},
		held:            []int{1, 1000, 10000, 100000},
		// Two renewal intervals of the default TTL (10s, renewed every
		// TTL/3): every held lease is renewed in it twice.
		heldWindow: 20 * time.Second / 3,
		plots:      "plots",
	}
}

// quick shortens every setting not in set (the flags given explicitly).
func (c *config) quick(set map[string]bool) {
	if !set["reps"] {
		c.reps = 1
	}
	if !set["dur"] {
		c.dur = 300 * time.Millisecond
	}
	if !set["contended-dur"] {
		c.contDur = 500 * time.Millisecond
	}
	if !set["rt-ops"] {
		c.rtOps = 20
	}
	c.scaleGoroutines = []int{1, 16, 256}
	c.waiters = []int{1, 100}
	c.held = []int{1, 1000}
	if !set["held-window"] {
		c.heldWindow = 4 * time.Second
	}
	if !set["plots"] {
		c.plots = ""
	}
}

// progress prints one line per run to w.
func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

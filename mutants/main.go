// Command mutants runs the curated mutant suite: each definition in defs/
// is a deliberate bug, applied alone to a scratch copy of the tree, and
// the tests it names must fail on it. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

type opts struct {
	root    string
	defs    string
	run     *regexp.Regexp
	timeout time.Duration
	all     bool
	servers *servers
	verbose bool
	logs    string // if set, each mutant's test output goes to logs/NAME.log
	out     io.Writer
	jobs    int  // mutants run at once, each on its own copy of the tree
	trust   bool // no clean-tree runs: the caller has just passed every test

	mu       sync.Mutex         // guards out and baseline
	baseline map[string]*result // clean-tree runs, by test command
}

func main() {
	cache := os.Getenv("FENCELOCK_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "fencelock")
	}
	root := flag.String("root", "..", "the tree to mutate (a copy of it)")
	defs := flag.String("defs", "defs", "the directory of mutant definitions")
	run := flag.String("run", "", "run only the mutants whose name matches this regexp")
	timeout := flag.Duration("timeout", 5*time.Minute, "go test -timeout of each test command")
	all := flag.Bool("all", false, "run every test of a mutant, not only up to the first that kills it")
	list := filepath.Join(cache, "servers")
	listOnly := flag.Bool("list", false, "list the mutants and exit")
	verbose := flag.Bool("v", false, "print the output of the failing test runs")
	logs := flag.String("logs", "", "write each mutant's test output to `dir`/NAME.log")
	jobs := flag.Int("j", 1, "run `n` mutants at once, each on its own copy of the tree")
	trust := flag.Bool("trust-clean", false, "skip the clean-tree runs that check each killing test passes without the mutant: "+
		"only where every test has just passed on the unmutated tree (CI, after make test)")
	flag.Parse()
	if *jobs < 1 {
		fmt.Fprintln(os.Stderr, "mutants: -j: want at least 1, got", *jobs)
		os.Exit(2)
	}
	sel, err := regexp.Compile(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants: -run:", err)
		os.Exit(2)
	}
	o := &opts{root: *root, defs: *defs, run: sel, timeout: *timeout, all: *all, servers: &servers{list: list},
		verbose: *verbose, logs: *logs, out: os.Stdout, jobs: *jobs, trust: *trust, baseline: map[string]*result{}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := o.main(ctx, *listOnly)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		code = 2
	}
	os.Exit(code)
}

func (o *opts) main(ctx context.Context, list bool) (int, error) {
	all, err := loadDefs(o.defs)
	if err != nil {
		return 0, err
	}
	var ms []*mutant
	for _, m := range all {
		if o.run.MatchString(m.name) {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return 0, fmt.Errorf("no mutant matches -run %q", o.run)
	}
	if o.logs != "" {
		if err := os.MkdirAll(o.logs, 0o755); err != nil {
			return 0, err
		}
	}
	if list {
		for _, m := range ms {
			fmt.Fprintf(o.out, "%-40s %s\n", m.name, m.breaks)
		}
		return 0, nil
	}
	scratch, err := os.MkdirTemp("", "fencelock-mutants-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(scratch)
	// One copy per job: a mutant edits its copy in place until undone.
	trees := make([]string, min(o.jobs, len(ms)))
	for i := range trees {
		trees[i] = filepath.Join(scratch, fmt.Sprintf("tree%d", i))
		if err := copyTree(o.root, trees[i]); err != nil {
			return 0, fmt.Errorf("copying the tree: %w", err)
		}
	}
	fmt.Fprintf(o.out, "%d mutants, each on a copy of %s, %d at once\n", len(ms), o.root, len(trees))

	start := time.Now()
	reports := make([]report, len(ms))
	next := make(chan int)
	var wg sync.WaitGroup
	for _, tree := range trees {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				reports[i] = o.runMutant(ctx, tree, ms[i])
				o.mu.Lock()
				fmt.Fprintln(o.out, reports[i].line())
				o.mu.Unlock()
			}
		}()
	}
	ran := 0
	for i := range ms {
		if ctx.Err() != nil {
			break
		}
		next <- i
		ran++
	}
	close(next)
	wg.Wait()
	reports = reports[:ran]
	return summary(o.out, reports, o.baseline, o.trust, time.Since(start)), ctx.Err()
}

// A report is one mutant's outcome.
type report struct {
	m        *mutant
	verdict  string // killed, SURVIVED, does not apply, does not build, not judged
	by       string // what killed it, or the reason for the verdict
	cmd      string // the test command that killed it
	elapsed  time.Duration
	tests    int // test commands run on the mutant
	pending  bool
	problem  bool // the verdict fails the run
	killedBy []string
	// survivedBy are the test commands that passed on the mutant.
	survivedBy []string
}

func (r report) line() string {
	s := fmt.Sprintf("mutant %s: ", r.m.name)
	switch r.verdict {
	case "killed":
		s += "killed by " + strings.Join(r.killedBy, "; ")
		if len(r.survivedBy) > 0 {
			s += "; not by " + strings.Join(r.survivedBy, "; ")
		}
		if r.pending {
			s += " — but marked pending (" + r.m.pending + "): drop its pending: line"
		}
	case "SURVIVED":
		s += "SURVIVED"
		if r.pending {
			s += " (pending: " + r.m.pending + ")"
		}
	default:
		s += r.verdict + ": " + r.by
	}
	return s + fmt.Sprintf(" (%.1fs)", r.elapsed.Seconds())
}

// runMutant applies m to tree, runs its tests, and undoes it.
func (o *opts) runMutant(ctx context.Context, tree string, m *mutant) report {
	rep := report{m: m, pending: m.pending != ""}
	start := time.Now()
	undo, err := m.apply(tree)
	if err != nil {
		rep.verdict, rep.by, rep.problem = "does not apply", err.Error(), true
		return rep
	}
	var killers []testCmd
	var results []result
	var log strings.Builder
	defer func() {
		if o.logs != "" {
			_ = os.WriteFile(filepath.Join(o.logs, m.name+".log"), []byte(log.String()), 0o644)
		}
	}()
	for _, c := range m.tests {
		if ctx.Err() != nil {
			break
		}
		rep.tests++
		r, err := o.goTest(ctx, tree, c)
		fmt.Fprintf(&log, "=== mutant %s: go test %s: failed=%v (%.1fs)\n%s\n", m.name, c, r.failed, r.elapsed.Seconds(), r.output)
		if err == nil && !r.failed {
			rep.survivedBy = append(rep.survivedBy, c.String())
		}
		switch {
		case err != nil:
			rep.verdict, rep.by, rep.problem = "not judged", err.Error(), true
		case r.build:
			rep.verdict, rep.by, rep.problem = "does not build", c.String()+"\n"+tail(r.output, 20), true
		}
		if rep.verdict != "" {
			break
		}
		if r.failed {
			killers, results = append(killers, c), append(results, r)
			if o.verbose {
				o.mu.Lock()
				fmt.Fprintf(o.out, "--- mutant %s: %s failed:\n%s\n", m.name, c, tail(r.output, 60))
				o.mu.Unlock()
			}
			if !o.all {
				break
			}
		}
	}
	rep.elapsed = time.Since(start) // the clean-tree runs below are not the mutant's
	if err := undo(); err != nil {
		rep.verdict, rep.by, rep.problem = "not judged", "undoing the mutant: "+err.Error(), true
		return rep
	}
	if rep.verdict != "" {
		return rep
	}
	if len(killers) == 0 {
		if ctx.Err() != nil {
			rep.verdict, rep.by, rep.problem = "not judged", "interrupted", true
			return rep
		}
		rep.verdict, rep.problem = "SURVIVED", !rep.pending
		return rep
	}
	// A kill counts only if the test passes on the unmutated tree.
	for i, c := range killers {
		if b := o.clean(ctx, tree, c); b.failed {
			rep.verdict, rep.problem = "not judged", true
			rep.by = fmt.Sprintf("%s fails on the unmutated tree too: %s\n%s", c, b.killedBy(), tail(b.output, 20))
			return rep
		}
		rep.killedBy = append(rep.killedBy, results[i].killedBy())
		if rep.cmd == "" {
			rep.cmd = c.String()
		}
	}
	rep.verdict, rep.problem = "killed", rep.pending
	return rep
}

// clean returns c's run on the unmutated tree, run once per command (a
// job may repeat one that another job runs at the same time). With
// -trust-clean it runs nothing and reports a pass.
func (o *opts) clean(ctx context.Context, tree string, c testCmd) *result {
	if o.trust {
		return &result{}
	}
	o.mu.Lock()
	b := o.baseline[c.String()]
	o.mu.Unlock()
	if b != nil {
		return b
	}
	r, err := o.goTest(ctx, tree, c)
	if err != nil {
		r.failed, r.note = true, err.Error()
	}
	o.mu.Lock()
	o.baseline[c.String()] = &r
	o.mu.Unlock()
	return &r
}

// summary prints the table and returns the exit code: 1 if any mutant
// survived (unless pending), did not apply or build, or could not be
// judged, or if a pending one was killed.
func summary(w io.Writer, reps []report, baseline map[string]*result, trusted bool, total time.Duration) int {
	fmt.Fprintf(w, "\n%-40s %-18s %8s  %s\n", "mutant", "result", "time", "killed by")
	counts := map[string]int{}
	code := 0
	var tests time.Duration
	for _, r := range reps {
		verdict := r.verdict
		if r.pending {
			verdict += " (pending)"
		}
		by := strings.Join(r.killedBy, "; ")
		if by == "" && r.verdict != "SURVIVED" {
			by, _, _ = strings.Cut(r.by, "\n")
		}
		fmt.Fprintf(w, "%-40s %-18s %7.1fs  %s\n", r.m.name, verdict, r.elapsed.Seconds(), by)
		counts[verdict]++
		tests += r.elapsed
		if r.problem {
			code = 1
		}
	}
	var base time.Duration
	for _, b := range baseline {
		base += b.elapsed
	}
	var parts []string
	for _, v := range []string{"killed", "SURVIVED", "SURVIVED (pending)", "killed (pending)", "does not apply", "does not build", "not judged"} {
		if n := counts[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	clean := fmt.Sprintf("%d clean-tree runs %s", len(baseline), base.Round(time.Second))
	if trusted {
		clean = "no clean-tree runs (-trust-clean)"
	}
	fmt.Fprintf(w, "\n%d mutants: %s. Mutant runs %s (summed over the jobs), %s, total %s.\n",
		len(reps), strings.Join(parts, ", "), tests.Round(time.Second), clean, total.Round(time.Second))
	return code
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

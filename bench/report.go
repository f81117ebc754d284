package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

func (r *report) markdown(w io.Writer) {
	c := r.cfg
	fmt.Fprintf(w, "Run %s on %s. %d repetitions; figures are medians over them, ratios are medians of the per-repetition ratios measured side by side.\n\n",
		r.started.Format("2006-01-02 15:04 MST"), r.env, c.reps)
	fmt.Fprintf(w, "Host: %s; load average %s at the start, %s at the end (1 minute, %d CPUs).\n\n",
		r.host, loadCell(r.load[0]), loadCell(r.load[1]), runtime.NumCPU())
	if len(r.uncontended) > 0 {
		fmt.Fprintf(w, "### 1. Uncontended: 1 goroutine, a new lock name per pair, %v per run\n\n", c.dur)
		pairTable(w, r.uncontended)
	}
	if len(r.parallel) > 0 {
		fmt.Fprintf(w, "### 2. Parallel: %d goroutines, a new lock name per pair, %v per run\n\n", c.goroutines, c.dur)
		pairTable(w, r.parallel)
		fmt.Fprintf(w, "Side by side: pairs/s over other rows' and over the server's limit, medians of the per-repetition ratios\n\n")
		sideTable(w, r.parallel)
	}
	if len(r.contended) > 0 {
		fmt.Fprintf(w, "### 3. Contended: %d goroutines on one lock name, hold %v, think %v, %v per run\n\n",
			c.goroutines, c.hold, c.think, c.contDur)
		contTable(w, r.contended)
	}
	if c.scenarios["4"] && len(r.roundTrips) > 0 {
		fmt.Fprintf(w, "### 4. Round trips and commands per operation (%d operations each)\n\n", c.rtOps)
		rtTable(w, r.roundTrips, func(contestant) bool { return true })
	}
	if len(r.calls) > 0 {
		fmt.Fprintf(w, "### 5. Server cost of one redis.call, timed inside a script (no network)\n\n")
		callTable(w, r.calls)
	}
	if len(r.scaling) > 0 {
		fmt.Fprintf(w, "### 7. Scaling: pairs/s on distinct names against goroutines, %v per run\n\n", c.dur)
		scalingTable(w, r.cfg.scaleGoroutines, r.scaling)
		if len(r.batches) > 0 {
			fmt.Fprintf(w, "Batch sizes: fencelock's round trips by the commands they carried (one per acquisition or Lua release, two per native release), every repetition\n\n")
			batchTable(w, r.cfg.scaleGoroutines, r.batches)
		}
	}
	if len(r.waiters) > 0 {
		fmt.Fprintf(w, "### 8. Handoff latency against waiters on one lock, hold %v, think %v, %v per run\n\n", c.hold, c.think, c.contDur)
		waitersTable(w, r.cfg.waiters, r.waiters)
	}
	if len(r.held) > 0 {
		fmt.Fprintf(w, "### 9. Held leases: what keeping them costs (defaults: TTL 10s, renewed every TTL/3), measured over %v\n\n", c.heldWindow.Round(time.Millisecond))
		heldTable(w, r.held)
	}
	if c.scenarios["6"] {
		fmt.Fprintf(w, "### 6. Quorum over 3 servers\n\n")
		if r.quorumNote != "" {
			fmt.Fprintf(w, "%s.\n\n", r.quorumNote)
		}
		three := func(c contestant) bool { return c.nodes == 3 }
		var un, par []pairRow
		for _, row := range r.uncontended {
			if three(row.c) {
				un = append(un, row)
			}
		}
		for _, row := range r.parallel {
			if three(row.c) {
				par = append(par, row)
			}
		}
		if len(un) > 0 {
			fmt.Fprintf(w, "Uncontended (from table 1):\n\n")
			pairTable(w, un)
		}
		if len(par) > 0 {
			fmt.Fprintf(w, "Parallel (from table 2):\n\n")
			pairTable(w, par)
		}
		if len(r.roundTrips) > 0 {
			rtTable(w, r.roundTrips, three)
		}
	}
}

func pairTable(w io.Writer, rows []pairRow) {
	fmt.Fprintln(w, "| contestant | pairs/s | × floor | × floor+token | server CPU µs/pair | client CPU µs/pair | cores busy | allocs/pair | server, client × floor+token | pair p50 | p50 × floor+token | pair p99 | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.c.baseline {
			fmt.Fprintf(w, "| %s | – | – | – | – | %.1f | – | %.1f | – | %s | – | %s | %s |\n", r.c.name,
				r.cost.client, r.cost.allocs, us(r.p50), us(r.p99), errCell(r.errs, r.firstErr))
			continue
		}
		// Cores busy: the CPU both sides spent per second of the run, of
		// the machine's cores. A row below the others' at a lower CPU
		// per pair is bound by waiting, not by work.
		busy := r.perSec * (r.cost.server + r.cost.client) / 1e6
		sides := "–" // no floor+token row ran (-only)
		if r.hasFloorTokn {
			sides = fmt.Sprintf("%.2f×, %.2f×", r.xServer, r.xClient)
		}
		p50, xp50, p99 := us(r.p50), ratio(r.xP50, r.hasFloorTokn), us(r.p99)
		if r.c.limit != nil {
			p50, xp50, p99 = "–", "–", "–" // pipelines, not pairs, are timed
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %.1f | %.1f | %.2f | %.1f | %s | %s | %s | %s | %s |\n", r.c.name, r.perSec,
			ratio(r.xFloor, r.hasFloor), ratio(r.xFloorToken, r.hasFloorTokn),
			r.cost.server, r.cost.client, busy, r.cost.allocs, sides,
			p50, xp50, p99, errCell(r.errs, r.firstErr))
	}
	fmt.Fprintln(w)
}

func contTable(w io.Writer, rows []contRow) {
	fmt.Fprintln(w, "| contestant | acq/s | handoffs/s | × redsync | handoff p50 | RT | p50 in RTs | handoff p99 | wait p99 | wait max | per-goroutine min/max | Jain | gave up | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		errs := errCell(r.errs, r.firstErr)
		if r.violations > 0 {
			errs += fmt.Sprintf(" **%d double holds**", r.violations)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %s | %s | %.1f | %s | %s | %s | %.0f/%.0f | %.3f | %d | %s |\n",
			r.c.name, r.acqPerSec, r.handoffPerSec, ratio(r.xRedsync, r.xRedsync > 0),
			us(r.handoffP50), us(r.rtt), r.handoffP50RT, us(r.handoffP99), ms(r.waitP99), ms(r.waitMax),
			r.minG, r.maxG, r.jain, r.gaveUp, errs)
	}
	fmt.Fprintln(w)
}

func rtTable(w io.Writer, rows []rtRow, keep func(contestant) bool) {
	fmt.Fprintln(w, "| contestant | acquire RTs | release RTs | renew RTs | client cmds acq/rel/renew | server cmds acq/rel/renew | server CPU acq/rel/renew |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if !keep(r.c) {
			continue
		}
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %s |||||\n", r.c.name, oneLine(r.err))
			continue
		}
		x := r.res
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s/%s/%s | %s/%s/%s | %.1f/%.1f/%.1fµs |\n", r.c.name,
			num(x.acq.rounds), num(x.rel.rounds), num(x.renew.rounds),
			num(x.acq.clientCmds), num(x.rel.clientCmds), num(x.renew.clientCmds),
			num(x.acq.serverCmds), num(x.rel.serverCmds), num(x.renew.serverCmds),
			micros(x.acq.serverCPU), micros(x.rel.serverCPU), micros(x.renew.serverCPU))
	}
	fmt.Fprintln(w)
}

func ratio(x float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

func num(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprintf("%.2f", x)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func errCell(n int, first error) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", n, oneLine(first))
}

func oneLine(err error) string {
	if err == nil {
		return ""
	}
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

func callTable(w io.Writer, rows []callCost) {
	fmt.Fprintln(w, "| redis.call | ns per call, min | median |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.0f | %.0f |\n", r.name, r.min, r.p50)
	}
	fmt.Fprintln(w)
}

func scalingTable(w io.Writer, gs []int, rows []scalingRow) {
	fmt.Fprint(w, "| contestant |")
	for _, g := range gs {
		fmt.Fprintf(w, " %d |", g)
	}
	fmt.Fprintf(w, " server, client CPU µs/pair at %d |\n|---|", gs[len(gs)-1])
	for range gs {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |", r.c.name)
		for _, x := range r.perSec {
			fmt.Fprintf(w, " %.0f |", x)
		}
		for range len(gs) - len(r.perSec) {
			fmt.Fprint(w, " – |")
		}
		if n := len(r.cost); n > 0 {
			fmt.Fprintf(w, " %.1f, %.1f |\n", r.cost[n-1].server, r.cost[n-1].client)
		} else {
			fmt.Fprintln(w, " – |")
		}
	}
	fmt.Fprintln(w)
}

func waitersTable(w io.Writer, ns []int, rows []waitersRow) {
	fmt.Fprintln(w, "| contestant | waiters | handoffs/s | handoff p50 | handoff p99 | wait p99 | server cmds per acquisition | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		for i := range r.p50 {
			errs := "0"
			if i == len(r.p50)-1 && (r.errs > 0 || r.violations > 0) {
				errs = fmt.Sprintf("%d, %d double holds (all runs)", r.errs, r.violations)
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %.1f | %s |\n", r.c.name, ns[i], r.handoffsPerSec[i],
				us(r.p50[i]), us(r.p99[i]), ms(r.waitP99[i]), r.srvCmdsPerAcq[i], errs)
		}
	}
	fmt.Fprintln(w)
}

func heldTable(w io.Writer, rows []heldRow) {
	fmt.Fprintln(w, "| held leases | heap bytes per lease | goroutines | renewals/s | client CPU µs/s | client CPU µs per renewal | server CPU µs/s | lost | errors |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		heap, per := "–", "–" // too few leases, or renewals, to tell from the noise
		if r.n >= minHeldForHeap {
			heap = fmt.Sprintf("%.0f", r.heapPer)
		}
		if r.renewals >= 10 {
			per = fmt.Sprintf("%.1f", r.cpuPer)
		}
		fmt.Fprintf(w, "| %d | %s | %d | %.0f | %.0f | %s | %.0f | %d | %d |\n", r.n, heap, r.goroutines,
			r.renewals, r.clientCPU, per, r.serverCPU, r.lost, r.errs)
	}
	fmt.Fprintln(w)
}

// sideBy are the rows that the side-by-side table divides every row's
// pairs/s by: the targets' baselines, then the server's limits.
var sideBy = []string{"floor+token", "redislock", "rueidislock", "rueidislock/one-key", "redsync/redlock-3",
	"server limit: fencelock", "server limit: floor+token"}

// sideTable gives each row's pairs/s over sideBy's that ran, as medians
// of the ratios within each repetition (the rows' perRep, index by
// index).
func sideTable(w io.Writer, rows []pairRow) {
	var by []*pairRow
	for _, name := range sideBy {
		for j := range rows {
			if rows[j].c.name == name {
				by = append(by, &rows[j])
			}
		}
	}
	fmt.Fprint(w, "| contestant | pairs/s |")
	for _, b := range by {
		if n, ok := strings.CutPrefix(b.c.name, "server limit: "); ok {
			fmt.Fprintf(w, " %% of %s's limit |", n)
		} else {
			fmt.Fprintf(w, " × %s |", b.c.name)
		}
	}
	fmt.Fprint(w, "\n|---|---:|")
	for range by {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		if r.c.baseline {
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f |", r.c.name, r.perSec)
		for _, b := range by {
			var xs []float64
			for rep := 0; rep < min(len(r.perRep), len(b.perRep)); rep++ {
				if b.perRep[rep] > 0 {
					xs = append(xs, r.perRep[rep]/b.perRep[rep])
				}
			}
			switch {
			case len(xs) == 0:
				fmt.Fprint(w, " – |")
			case b.c.limit != nil:
				fmt.Fprintf(w, " %.0f%% |", 100*median(xs))
			default:
				fmt.Fprintf(w, " %.2f× |", median(xs))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func loadCell(x float64) string {
	if x < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f", x)
}

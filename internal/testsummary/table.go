package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printTable writes the summary of every cell and reports whether all of
// them passed. Packages without tests are left out.
func printTable(w io.Writer, recs []record) bool {
	fmt.Fprintln(w, "\n== summary: top-level tests per server and package (go test -race -count=1)")
	type row struct {
		server, path     string
		pass, fail, skip int
		time, mark       string
	}
	rows := []row{}
	var failures []string
	var servers []string
	wall := map[string]float64{}
	ok := true
	for _, r := range recs {
		if _, seen := wall[r.Server]; !seen {
			servers = append(servers, r.Server)
		}
		wall[r.Server] += r.Wall
		pkgFailed := false
		for _, p := range r.Packages {
			if p.Pass+p.Fail+p.Skip == 0 && !p.failed() {
				continue
			}
			rw := row{r.Server, p.Path, p.Pass, p.Fail, p.Skip, seconds(p.Elapsed), ""}
			if p.failed() {
				rw.mark = "FAIL"
				pkgFailed = true
			}
			rows = append(rows, rw)
			for _, t := range p.Failed {
				failures = append(failures, fmt.Sprintf("%s\t%s\t%s", r.Server, p.Path, t))
			}
			if p.failed() && len(p.Failed) == 0 {
				failures = append(failures, fmt.Sprintf("%s\t%s\t(package failed without a failing test: see its output above)", r.Server, p.Path))
			}
		}
		if r.Exit != 0 && !pkgFailed {
			failures = append(failures, fmt.Sprintf("%s\t-\t(go test exited %d without a failing package: see the output above)", r.Server, r.Exit))
		}
		ok = ok && !r.failed()
	}
	sw, pw := len("server"), len("package")
	for _, rw := range rows {
		sw, pw = max(sw, len(rw.server)), max(pw, len(rw.path))
	}
	fmt.Fprintf(w, "%-*s  %-*s  %5s  %5s  %5s  %8s\n", sw, "server", pw, "package", "pass", "fail", "skip", "time")
	for _, rw := range rows {
		line := fmt.Sprintf("%-*s  %-*s  %5d  %5d  %5d  %8s  %s", sw, rw.server, pw, rw.path, rw.pass, rw.fail, rw.skip, rw.time, rw.mark)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range servers {
		name := s
		if s == "-" {
			name = "- (no server)"
		}
		fmt.Fprintf(tw, "%s\twall %s\n", name, seconds(wall[s]))
	}
	tw.Flush()

	if ok {
		fmt.Fprintln(w, "\nPASS: every cell passed")
		return true
	}
	fmt.Fprintf(w, "\nFAIL: %d failing (server, package, test):\n", len(failures))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range failures {
		fmt.Fprintln(tw, "  "+f)
	}
	tw.Flush()
	return false
}

func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

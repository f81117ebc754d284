package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fenceprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/push"
)

// metricsFlags are where run and elect report the lease's metrics,
// fenceprom's: served while fencelock runs (--metrics-addr), which suits
// a long-running elect; and, for a batch job that a scrape rarely
// catches running, pushed to a Pushgateway (--metrics-push) or written
// for the node exporter's textfile collector (--metrics-textfile) when
// fencelock exits, as Prometheus's own advice for batch jobs has it.
type metricsFlags struct {
	addr, push, textfile string
}

func (f *metricsFlags) add(cmd *command) {
	cmd.fs.StringVar(&f.addr, "metrics-addr", "", "serve Prometheus metrics of the lease at http://`addr`/metrics while fencelock runs")
	cmd.fromEnv("metrics-addr", "FENCELOCK_METRICS_ADDR")
	cmd.fs.StringVar(&f.push, "metrics-push", "", "when fencelock exits, push the lease's metrics to the Pushgateway at `URL` (job \"fencelock\",\n      grouped by lock), for batch jobs that a scrape would miss")
	cmd.fromEnv("metrics-push", "FENCELOCK_METRICS_PUSH")
	cmd.fs.StringVar(&f.textfile, "metrics-textfile", "", "when fencelock exits, write the lease's metrics to `FILE` (*.prom) for the node exporter's\n      textfile collector")
	cmd.fromEnv("metrics-textfile", "FENCELOCK_METRICS_TEXTFILE")
}

// check validates the outputs without using them, so that a bad one is
// a usage error before anything is sent.
func (f *metricsFlags) check(cmd *command) error {
	if f.push != "" {
		u, err := url.Parse(f.push)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			from := cmd.from["metrics-push"] + " "
			if !strings.HasPrefix(from, "--") {
				from = strings.TrimSpace(from) + "="
			}
			return usageErrorf("%s%s: want an http:// or https:// URL, the Pushgateway's, e.g. http://pushgateway:9091", from, redactedPushURL(f.push))
		}
	}
	if f.textfile != "" {
		if !strings.HasSuffix(f.textfile, ".prom") {
			return usageErrorf("%s: the node exporter's textfile collector reads only files named *.prom", cmd.source("metrics-textfile"))
		}
		// WriteToTextfile writes a temporary file beside it, then renames.
		tmp, err := os.CreateTemp(filepath.Dir(f.textfile), ".fencelock-metrics-*")
		if err != nil {
			return usageErrorf("%s: cannot create a file there: %v", cmd.source("metrics-textfile"), err)
		}
		tmp.Close()
		os.Remove(tmp.Name())
		if fi, err := os.Stat(f.textfile); err == nil && !fi.Mode().IsRegular() {
			return usageErrorf("%s: is not a regular file", cmd.source("metrics-textfile"))
		}
	}
	return nil
}

// start starts serving, and returns the hooks that feed every output,
// and done, which ends the outputs: the last push, the file, the server.
// done reports what fails on stderr as cmdName's, and changes no exit
// status: the metrics are not COMMAND's business.
func (f *metricsFlags) start(name, cmdName string, timeout time.Duration, stderr io.Writer) (hooks *fencelock.Hooks, done func(), err error) {
	var (
		all   []*fencelock.Hooks
		steps []func()
	)
	// Served and written series carry the lock's name as a label (a
	// textfile collector reads many files into one page); pushed ones do
	// not, as the grouping key gives them that label, and the push
	// client refuses series that have one of its own.
	if f.addr != "" || f.textfile != "" {
		m := fenceprom.New(&fenceprom.Options{LockLabel: true})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		all = append(all, m.Hooks())
		if f.addr != "" {
			stop, err := serveMetrics(f.addr, reg)
			if err != nil {
				return nil, nil, err
			}
			steps = append(steps, stop)
		}
		if f.textfile != "" {
			steps = append(steps, func() {
				if err := prometheus.WriteToTextfile(f.textfile, reg); err != nil {
					fmt.Fprintf(stderr, "fencelock %s: --metrics-textfile %s: %s\n", cmdName, f.textfile, message(err))
					return
				}
				// Written mode 0600; the node exporter runs as another user.
				os.Chmod(f.textfile, 0o644)
			})
		}
	}
	if f.push != "" {
		m := fenceprom.New(nil)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		all = append(all, m.Hooks())
		p := push.New(f.push, "fencelock").Grouping("lock", name).Gatherer(reg).Client(&http.Client{Timeout: timeout})
		steps = append([]func(){func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := p.PushContext(ctx); err != nil {
				fmt.Fprintf(stderr, "fencelock %s: --metrics-push %s: %s\n", cmdName, redactedPushURL(f.push), maskPushPassword(f.push, message(err)))
			}
		}}, steps...)
	}
	return fencelock.JoinHooks(all...), func() {
		for _, step := range steps {
			step()
		}
	}, nil
}

// redactedPushURL returns the Pushgateway's URL with any password masked.
func redactedPushURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "(invalid URL)"
	case u.User == nil:
		return raw // as typed: nothing to mask
	}
	return u.Redacted()
}

// maskPushPassword masks the Pushgateway URL's password in msg, which may
// quote the URL pushed to.
func maskPushPassword(raw, msg string) string {
	if u, err := url.Parse(raw); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// serveMetrics serves reg on addr at /metrics until stop is called: run
// and elect hold one lock, so the lock label costs one series per metric.
// The registry holds fenceprom's collector alone. stop returns once the
// server has shut down.
func serveMetrics(addr string, reg *prometheus.Registry) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fenceprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveMetrics serves, on addr at /metrics until stop is called, the
// metrics of fenceprom's collector fed by the returned hooks: its names
// and series, with the lock's name as a label (run and elect hold one
// lock, so it costs one series per metric). The registry holds nothing
// else. stop returns once the server has shut down.
func serveMetrics(addr string) (hooks *fencelock.Hooks, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	m := fenceprom.New(&fenceprom.Options{LockLabel: true})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	return m.Hooks(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}

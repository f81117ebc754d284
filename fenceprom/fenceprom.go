// Package fenceprom exports the events of fencelock's leases and of
// fenced stores as Prometheus metrics.
//
// A Collector implements both fencelock.Hooks and fence.Hooks; register
// it once and hand its hooks to every Client and Store to be measured:
//
//	m := fenceprom.New(nil)
//	prometheus.MustRegister(m)
//	c := fencelock.New(rdb, &fencelock.Options{Hooks: m.Hooks()})
//	store := fence.WithHooks(redisfence.New(rdb, nil), m.FenceHooks())
//
// The adapters whose fenced accesses are not fence.Store methods take the
// same hooks themselves: sqlfence's Store.WithHooks (for Tx), and the
// Hooks field of httpfence.Middleware and grpcfence.Server.
//
// Lock and resource names are not labels unless Options asks for them:
// each distinct name would be a time series of its own.
//
// Every series whose labels are known in advance exists, at zero, from
// New on, so that a query such as increase(fencelock_leases_lost_total[10m])
// sees a process's first loss: a counter that appears at 1 shows no
// increase. With LockLabel or ResourceLabel, a name's series are made at
// zero when the name is first seen (a lock's first acquisition attempt, a
// resource's first fenced access); an event in the same scrape interval
// as that first sight can still be missed.
package fenceprom

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Collector. A nil *Options is valid and selects every
// default.
type Options struct {
	// LockLabel adds a "lock" label, the lock's name, to every metric.
	// Each lock name then makes time series of its own: set it only when
	// the application uses a small, fixed set of names, never names built
	// from user input or IDs.
	// Default: false.
	LockLabel bool

	// ResourceLabel adds a "resource" label, the resource's name, to the
	// fence metrics, with the same caveat as LockLabel.
	// Default: false.
	ResourceLabel bool

	// LatencyBuckets are the upper bounds, in seconds, of the histograms
	// of round trips: acquire attempts, renewals, releases and fenced
	// accesses.
	// Default: 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	// 0.5, 1, 2.5, 5, 10.
	LatencyBuckets []float64

	// DurationBuckets are the upper bounds, in seconds, of the histograms
	// of acquisition waits and of how long leases were held.
	// Default: 0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600.
	DurationBuckets []float64
}

var (
	defaultLatencyBuckets  = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	defaultDurationBuckets = []float64{0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
)

// Results, the values of the "result" labels.
const (
	resultAcquired      = "acquired"
	resultNotAcquired   = "not_acquired"
	resultNotReplicated = "not_replicated"
	resultOK            = "ok"
	resultLost          = "lost"
	resultError         = "error"
	resultAccepted      = "accepted"
	resultStale         = "stale"
)

// A Collector turns lease and fence events into metrics. It is a
// prometheus.Collector; register it on a prometheus.Registerer. It is safe
// for concurrent use, and one Collector may serve many Clients and
// Stores.
type Collector struct {
	lockLabel, resourceLabel bool

	attempts       *prometheus.CounterVec   // result
	attemptLatency *prometheus.HistogramVec //
	acquires       *prometheus.CounterVec   // result
	wait           *prometheus.HistogramVec //
	renewals       *prometheus.CounterVec   // result
	renewLatency   *prometheus.HistogramVec //
	lost           *prometheus.CounterVec   //
	releases       *prometheus.CounterVec   // result
	releaseLatency *prometheus.HistogramVec //
	heldFor        *prometheus.HistogramVec //
	held           *prometheus.GaugeVec     //
	accesses       *prometheus.CounterVec   // op, result
	accessLatency  *prometheus.HistogramVec // op

	mu     sync.Mutex
	leases map[string]struct{} // IDs of the leases held
	seen   map[string]struct{} // lock names, and lock and resource names, whose series exist
}

// The label values each metric can have, made at zero before any event.
var (
	attemptResults = []string{resultAcquired, resultNotAcquired, resultError}
	acquireResults = []string{resultAcquired, resultNotAcquired, resultNotReplicated, resultError}
	renewResults   = []string{resultOK, resultError, resultLost}
	releaseResults = []string{resultOK, resultLost, resultError}
	accessOps      = []string{"put", "get", "delete", "tx", "http", "grpc"}
	accessResults  = []string{resultAccepted, resultStale, resultError}
)

// New returns a Collector configured by opts.
func New(opts *Options) *Collector {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LatencyBuckets == nil {
		o.LatencyBuckets = defaultLatencyBuckets
	}
	if o.DurationBuckets == nil {
		o.DurationBuckets = defaultDurationBuckets
	}
	c := &Collector{lockLabel: o.LockLabel, resourceLabel: o.ResourceLabel, leases: map[string]struct{}{}, seen: map[string]struct{}{}}
	lock := func(labels ...string) []string {
		if o.LockLabel {
			return append([]string{"lock"}, labels...)
		}
		return labels
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, lock(labels...))
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, lock(labels...))
	}
	c.attempts = counter("fencelock_acquire_attempts_total",
		"Acquisition round trips, by result: acquired (a token was issued), not_acquired (another lease holds the lock), error.", "result")
	c.attemptLatency = histogram("fencelock_acquire_attempt_duration_seconds",
		"Duration of acquisition round trips.", o.LatencyBuckets)
	c.acquires = counter("fencelock_acquires_total",
		"TryAcquire and Acquire calls, by result: acquired, not_acquired (held by another lease, or Acquire's context ended), not_replicated, error.", "result")
	c.wait = histogram("fencelock_acquire_wait_seconds",
		"Time from the first attempt of a successful acquisition to the lock being acquired.", o.DurationBuckets)
	c.renewals = counter("fencelock_renewals_total",
		"Renewal round trips, by result: ok, error (a Redis or network error; the lease lives on until its deadline), lost.", "result")
	c.renewLatency = histogram("fencelock_renew_duration_seconds",
		"Duration of renewal round trips.", o.LatencyBuckets)
	c.lost = counter("fencelock_leases_lost_total",
		"Leases lost: the lock was found gone or taken, or the lease's deadline passed without a renewal.")
	c.releases = counter("fencelock_releases_total",
		"Releases, by result: ok, lost (the lease had been lost or the lock was gone or taken), error.", "result")
	c.releaseLatency = histogram("fencelock_release_duration_seconds",
		"Duration of release round trips.", o.LatencyBuckets)
	c.heldFor = histogram("fencelock_lease_duration_seconds",
		"How long leases lasted, from acquisition to release or loss.", o.DurationBuckets)
	c.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fencelock_leases_held",
		Help: "Leases acquired and neither released nor lost yet.",
	}, lock())
	fenceLabels := func(labels ...string) []string {
		if o.ResourceLabel {
			labels = append([]string{"resource"}, labels...)
		}
		return lock(labels...)
	}
	c.accesses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencelock_fence_accesses_total",
		Help: "Fenced accesses to protected resources (put, get, delete; tx: sqlfence Tx; http, grpc: requests and calls the middleware checked), by result: accepted, stale (refused: the resource accepted a newer fence), error.",
	}, fenceLabels("op", "result"))
	c.accessLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fencelock_fence_access_duration_seconds",
		Help:    "Duration of fenced accesses to protected resources.",
		Buckets: o.LatencyBuckets,
	}, fenceLabels("op"))
	if !o.LockLabel {
		c.initLock("")
		if !o.ResourceLabel {
			c.initAccesses("", "")
		}
	}
	return c
}

// initLock makes the lock-side series of one lock name (any, if the lock
// is not a label) at zero.
func (c *Collector) initLock(lock string) {
	for _, r := range attemptResults {
		c.attempts.WithLabelValues(c.labels(lock, r)...)
	}
	for _, r := range acquireResults {
		c.acquires.WithLabelValues(c.labels(lock, r)...)
	}
	for _, r := range renewResults {
		c.renewals.WithLabelValues(c.labels(lock, r)...)
	}
	for _, r := range releaseResults {
		c.releases.WithLabelValues(c.labels(lock, r)...)
	}
	for _, h := range []*prometheus.HistogramVec{c.attemptLatency, c.wait, c.renewLatency, c.releaseLatency, c.heldFor} {
		h.WithLabelValues(c.labels(lock)...)
	}
	c.lost.WithLabelValues(c.labels(lock)...)
	c.held.WithLabelValues(c.labels(lock)...)
}

// initAccesses makes the fence series of one lock and resource at zero.
func (c *Collector) initAccesses(lock, resource string) {
	for _, op := range accessOps {
		values := []string{op}
		if c.resourceLabel {
			values = append([]string{resource}, values...)
		}
		for _, r := range accessResults {
			c.accesses.WithLabelValues(c.labels(lock, append(values, r)...)...)
		}
		c.accessLatency.WithLabelValues(c.labels(lock, values...)...)
	}
}

// sawLock makes the series of lock if it is a label and this is its first
// sight.
func (c *Collector) sawLock(lock string) {
	if c.lockLabel && c.firstSight(lock) {
		c.initLock(lock)
	}
}

// sawAccess does the same for the fence series of lock and resource.
func (c *Collector) sawAccess(lock, resource string) {
	if !c.lockLabel && !c.resourceLabel {
		return
	}
	if !c.resourceLabel {
		resource = ""
	}
	if !c.lockLabel {
		lock = ""
	}
	if c.firstSight("\x00" + lock + "\x00" + resource) {
		c.initAccesses(lock, resource)
	}
}

func (c *Collector) firstSight(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[key]; ok {
		return false
	}
	c.seen[key] = struct{}{}
	return true
}

func (c *Collector) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		c.attempts, c.attemptLatency, c.acquires, c.wait, c.renewals, c.renewLatency,
		c.lost, c.releases, c.releaseLatency, c.heldFor, c.held, c.accesses, c.accessLatency,
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

// Hooks returns the hooks to set as fencelock.Options.Hooks.
func (c *Collector) Hooks() *fencelock.Hooks {
	return &fencelock.Hooks{
		AcquireAttempt: c.acquireAttempt,
		AcquireDone:    c.acquireDone,
		RenewDone:      c.renewDone,
		LeaseLost:      c.leaseLost,
		ReleaseDone:    c.releaseDone,
	}
}

// FenceHooks returns the hooks to give fence.WithHooks.
func (c *Collector) FenceHooks() *fence.Hooks {
	return &fence.Hooks{Accepted: c.access, Stale: c.access, Failed: c.access}
}

// labels returns the label values: the lock's name first if wanted.
func (c *Collector) labels(lock string, values ...string) []string {
	if c.lockLabel {
		return append([]string{lock}, values...)
	}
	return values
}

func (c *Collector) acquireAttempt(_ context.Context, i fencelock.AcquireAttemptInfo) {
	c.sawLock(i.Name)
	result := resultError
	switch {
	case i.Err == nil:
		result = resultAcquired
	case errors.Is(i.Err, fencelock.ErrNotAcquired):
		result = resultNotAcquired
	}
	c.roundTrip(c.attempts, c.attemptLatency, i.Name, result, i.Latency)
}

func (c *Collector) acquireDone(_ context.Context, i fencelock.AcquireDoneInfo) {
	c.sawLock(i.Name)
	result := resultError
	switch {
	case i.Err == nil:
		result = resultAcquired
	case errors.Is(i.Err, fencelock.ErrNotReplicated):
		result = resultNotReplicated
	case errors.Is(i.Err, fencelock.ErrNotAcquired):
		result = resultNotAcquired
	}
	c.acquires.WithLabelValues(c.labels(i.Name, result)...).Inc()
	if i.Err != nil {
		return
	}
	c.wait.WithLabelValues(c.labels(i.Name)...).Observe(i.Wait.Seconds())
	c.mu.Lock()
	c.leases[i.LeaseID] = struct{}{}
	c.mu.Unlock()
	c.held.WithLabelValues(c.labels(i.Name)...).Inc()
}

func (c *Collector) renewDone(_ context.Context, i fencelock.RenewDoneInfo) {
	c.sawLock(i.Name)
	c.roundTrip(c.renewals, c.renewLatency, i.Name, leaseResult(i.Err), i.Latency)
}

func (c *Collector) leaseLost(_ context.Context, i fencelock.LeaseLostInfo) {
	c.sawLock(i.Name)
	c.lost.WithLabelValues(c.labels(i.Name)...).Inc()
	c.ended(i.Name, i.LeaseID, i.Held.Seconds())
}

func (c *Collector) releaseDone(_ context.Context, i fencelock.ReleaseDoneInfo) {
	c.sawLock(i.Name)
	c.roundTrip(c.releases, c.releaseLatency, i.Name, leaseResult(i.Err), i.Latency)
	c.ended(i.Name, i.LeaseID, i.Held.Seconds())
}

// leaseResult is the result of a renewal or release of a lease: ok, lost
// (the lease had been lost, or the lock was gone or taken) or error.
func leaseResult(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, fencelock.ErrLeaseLost):
		return resultLost
	}
	return resultError
}

// roundTrip records one round trip on lock name: its result on counter,
// its latency on latency.
func (c *Collector) roundTrip(counter *prometheus.CounterVec, latency *prometheus.HistogramVec, name, result string, d time.Duration) {
	counter.WithLabelValues(c.labels(name, result)...).Inc()
	latency.WithLabelValues(c.labels(name)...).Observe(d.Seconds())
}

// ended records the end of a lease this Collector saw acquired: the first
// of its loss and its release.
func (c *Collector) ended(name, id string, held float64) {
	c.mu.Lock()
	_, ok := c.leases[id]
	delete(c.leases, id)
	c.mu.Unlock()
	if !ok {
		return
	}
	c.held.WithLabelValues(c.labels(name)...).Dec()
	c.heldFor.WithLabelValues(c.labels(name)...).Observe(held)
}

func (c *Collector) access(_ context.Context, i fence.AccessInfo) {
	result := resultError
	switch {
	case i.Err == nil:
		result = resultAccepted
	case errors.Is(i.Err, fence.ErrStale):
		result = resultStale
	}
	lock := i.Fence.Lock
	if errors.Is(i.Err, fence.ErrInvalid) {
		lock = "" // whatever a client sent: no label values from it
	}
	c.sawAccess(lock, i.Resource)
	values := []string{i.Op, result}
	if c.resourceLabel {
		values = append([]string{i.Resource}, values...)
	}
	c.accesses.WithLabelValues(c.labels(lock, values...)...).Inc()
	c.accessLatency.WithLabelValues(c.labels(lock, values[:len(values)-1]...)...).Observe(i.Latency.Seconds())
}

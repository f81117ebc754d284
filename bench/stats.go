package main

import (
	"math/rand/v2"
	"slices"
	"time"
)

// samples collects durations up to a bound, then keeps every k-th, so a
// long run's memory stays bounded while percentiles stay representative.
type samples struct {
	d    []time.Duration
	seen int
}

const maxSamples = 1 << 18

func (s *samples) add(d time.Duration) {
	s.seen++
	if len(s.d) < maxSamples {
		s.d = append(s.d, d)
		return
	}
	// Reservoir sampling keeps a uniform sample of everything seen.
	if j := rand.N(s.seen); j < maxSamples {
		s.d[j] = d
	}
}

func (s *samples) merge(o *samples) {
	for _, d := range o.d {
		s.add(d)
	}
}

// percentile returns the p-th percentile (0 ≤ p ≤ 100) of the samples,
// nearest rank; 0 without samples. It sorts s.
func (s *samples) percentile(p float64) time.Duration {
	if len(s.d) == 0 {
		return 0
	}
	slices.Sort(s.d)
	i := int(p/100*float64(len(s.d))+0.5) - 1
	return s.d[min(max(i, 0), len(s.d)-1)]
}

func (s *samples) max() time.Duration {
	if len(s.d) == 0 {
		return 0
	}
	return slices.Max(s.d)
}

// median of xs (not modified); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are
// equal, 1/n when one gets everything.
func jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plot writes the PNG plots of the curves that were measured into dir:
// scaling.png (scenario 7), waiters.png (8) and held.png (9).
func (r *report) plot(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(r.scaling) > 0 {
		if err := r.plotScaling(filepath.Join(dir, "scaling.png")); err != nil {
			return err
		}
	}
	if len(r.waiters) > 0 {
		if err := r.plotWaiters(filepath.Join(dir, "waiters.png")); err != nil {
			return err
		}
	}
	if len(r.held) > 0 {
		if err := r.plotHeld(filepath.Join(dir, "held.png")); err != nil {
			return err
		}
	}
	return nil
}

// series are the contestants' line colours and dashes, fencelock first
// and solid.
var series = map[string]struct {
	c    color.Color
	dash []vg.Length
}{
	"fencelock":           {color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, nil},
	"floor":               {color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, []vg.Length{vg.Points(4), vg.Points(3)}},
	"floor+token":         {color.RGBA{A: 0xff}, []vg.Length{vg.Points(6), vg.Points(2)}},
	"redislock":           {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil},
	"redislock/tuned":     {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil},
	"redsync":             {color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, nil},
	"rueidislock":         {color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, nil},
	"rueidislock/one-key": {color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, []vg.Length{vg.Points(2), vg.Points(2)}},
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// logAxis makes an axis logarithmic with ticks at the given values, and
// spans them, so that an axis is positive even when no line has a point
// on it (a tiny run measures zeros, which lines skip). Without values it
// stays linear.
func logAxis(a *plot.Axis, at []float64) {
	if len(at) == 0 {
		return
	}
	a.Scale = plot.LogScale{}
	a.Min, a.Max = slices.Min(at), slices.Max(at)
	ticks := make(plot.ConstantTicks, len(at))
	for i, v := range at {
		ticks[i] = plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)}
	}
	a.Tick.Marker = ticks
}

// line adds a line with points named name to p.
func line(p *plot.Plot, name string, xs, ys []float64, width vg.Length, dash []vg.Length, c color.Color) error {
	pts := make(plotter.XYs, 0, len(xs))
	for i := range min(len(xs), len(ys)) {
		if ys[i] > 0 {
			pts = append(pts, plotter.XY{X: xs[i], Y: ys[i]})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, width, dash
	s.Color, s.Shape = c, draw.CircleGlyph{}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

func floats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func (r *report) plotScaling(file string) error {
	p := newPlot("Acquire+release pairs/s, distinct lock names", "goroutines", "pairs/s")
	xs := floats(r.cfg.scaleGoroutines)
	logAxis(&p.X, xs)
	for _, row := range r.scaling {
		st := series[row.c.name]
		width := vg.Points(1.5)
		if row.c.name == "fencelock" {
			width = vg.Points(2.5)
		}
		if err := line(p, row.c.name, xs, row.perSec, width, st.dash, st.c); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = false, false // the lines run above, the axis starts at 0
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, file)
}

func (r *report) plotWaiters(file string) error {
	p := newPlot("Handoff latency on one lock (solid p50, dashed p99)", "waiters", "handoff latency (µs)")
	xs := floats(r.cfg.waiters)
	logAxis(&p.X, xs)
	logAxis(&p.Y, []float64{10, 100, 1000, 10000, 100000, 1000000})
	for _, row := range r.waiters {
		st := series[row.c.name]
		width := vg.Points(1.5)
		if row.c.name == "fencelock" {
			width = vg.Points(2.5)
		}
		micros := func(ds []time.Duration) []float64 {
			out := make([]float64, len(ds))
			for i, d := range ds {
				out[i] = float64(d) / float64(time.Microsecond)
			}
			return out
		}
		if err := line(p, row.c.name+" p50", xs, micros(row.p50), width, nil, st.c); err != nil {
			return err
		}
		if err := line(p, row.c.name+" p99", xs, micros(row.p99), width, []vg.Length{vg.Points(5), vg.Points(3)}, st.c); err != nil {
			return err
		}
	}
	return p.Save(16*vg.Centimeter, 11*vg.Centimeter, file)
}

func (r *report) plotHeld(file string) error {
	var xs, heap, renewals, cpu []float64
	var heapXs []float64
	for _, row := range r.held {
		xs = append(xs, float64(row.n))
		if row.n >= minHeldForHeap {
			heapXs, heap = append(heapXs, float64(row.n)), append(heap, row.heapPer)
		}
		renewals = append(renewals, row.renewals)
		cpu = append(cpu, row.clientCPU)
	}
	red := series["fencelock"].c
	left := newPlot("Heap per held lease", "held leases", "bytes per lease")
	logAxis(&left.X, heapXs)
	if err := line(left, "heap bytes per lease", heapXs, heap, vg.Points(2), nil, red); err != nil {
		return err
	}
	left.Y.Min = 0
	left.Legend.Top, left.Legend.Left = false, false
	right := newPlot("Keeping them: per second", "held leases", "per second")
	right.Legend.Top, right.Legend.Left = false, false
	logAxis(&right.X, xs)
	logAxis(&right.Y, []float64{0.1, 1, 10, 100, 1000, 10000, 100000, 1000000})
	if err := line(right, "renewals/s", xs, renewals, vg.Points(2), nil, series["redsync"].c); err != nil {
		return err
	}
	if err := line(right, "client CPU µs/s", xs, cpu, vg.Points(2), []vg.Length{vg.Points(5), vg.Points(3)}, red); err != nil {
		return err
	}
	img := vgimg.New(24*vg.Centimeter, 10*vg.Centimeter)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", file, err)
	}
	return f.Close()
}

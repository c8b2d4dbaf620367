package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// latencySeries is one line of the chart: sorted latencies.
type latencySeries struct {
	name   string
	sorted []time.Duration
}

// Chart geometry, in SVG user units.
const (
	chartW      = 780
	chartH      = 440
	chartLeft   = 80
	chartRight  = 220 // room for the legend
	chartTop    = 50
	chartBottom = 60
	maxNines    = 3.0 // the x axis ends at 99.9%
)

// writeLatencySVG draws latency by percentile, HdrHistogram style: the x
// axis is -log10(1-q), so that 90%, 99% and 99.9% are evenly spaced, and
// the y axis is logarithmic, so that a fast and a contended scenario fit
// on one chart.
func writeLatencySVG(w io.Writer, title string, series []latencySeries) error {
	bw := bufio.NewWriter(w)
	pw := float64(chartW - chartLeft - chartRight)
	ph := float64(chartH - chartTop - chartBottom)

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		if len(s.sorted) == 0 {
			continue
		}
		lo = math.Min(lo, math.Log10(math.Max(float64(s.sorted[0]), 1)))
		hi = math.Max(hi, math.Log10(math.Max(float64(s.sorted[len(s.sorted)-1]), 1)))
	}
	if math.IsInf(lo, 0) {
		lo, hi = 5, 6 // no data: an empty chart from 100µs to 1ms
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi <= lo {
		hi = lo + 1
	}
	x := func(nines float64) float64 { return chartLeft + nines/maxNines*pw }
	y := func(d time.Duration) float64 {
		v := math.Log10(math.Max(float64(d), 1))
		return chartTop + ph - (v-lo)/(hi-lo)*ph
	}

	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(bw, `<text x="%d" y="25" font-size="14" font-weight="bold">%s</text>`+"\n", chartLeft, html.EscapeString(title))

	// Grid and axes.
	for _, t := range []struct {
		q     float64
		label string
	}{{0, "0%"}, {0.5, "50%"}, {0.9, "90%"}, {0.99, "99%"}, {0.999, "99.9%"}} {
		px := x(-math.Log10(1 - t.q))
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px, chartTop, px, chartTop+ph)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, chartTop+ph+18, t.label)
	}
	for e := lo; e <= hi; e++ {
		d := time.Duration(math.Pow(10, e))
		py := y(d)
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", chartLeft, py, chartLeft+pw, py)
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", chartLeft-6, py+4, d)
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", chartLeft, chartTop, pw, ph)
	fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">percentile</text>`+"\n", chartLeft+pw/2, chartH-15)
	fmt.Fprintf(bw, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">acquire latency (log scale)</text>`+"\n", chartTop+ph/2, chartTop+ph/2)

	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}
	for i, s := range series {
		if len(s.sorted) == 0 {
			continue
		}
		color := colors[i%len(colors)]
		var pts strings.Builder
		const steps = 300
		for k := 0; k <= steps; k++ {
			nines := maxNines * float64(k) / steps
			q := 1 - math.Pow(10, -nines)
			d := s.sorted[int(q*float64(len(s.sorted)-1))]
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(nines), y(d))
		}
		fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.TrimSpace(pts.String()))
		ly := chartTop + 10 + 20*i
		lx := chartLeft + int(pw) + 15
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", lx, ly, lx+20, ly, color)
		fmt.Fprintf(bw, `<text x="%d" y="%d">%s</text>`+"\n", lx+26, ly+4, html.EscapeString(s.name))
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

var contenderOrder = []string{"floor", "redlock", "redsync", "redislock"}

// row is the summary of one contender in one scenario: medians over the
// passes.
type row struct {
	scenario, contender string
	passes              int
	rate, p50, p99      float64
	mean                float64
	allocs, bytes, cpu  float64
	srvCPU              float64
	handovers, minShare float64
	errors              float64
	ratio               float64 // to the floor of the same pass
	hoVsRedsync         float64 // handovers/s over redsync's, same pass
	frozenVsHealthy     float64 // mean frozen cycle over mean healthy cycle, same pass
	p99VsHealthy        float64
}

type summary struct {
	scenarios []string
	rows      map[string]map[string]*row // scenario → contender
}

func median(xs []float64) float64 {
	xs = slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return math.IsNaN(x) })
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func summarize(results []result) *summary {
	s := &summary{rows: map[string]map[string]*row{}}
	type pk struct {
		scenario, contender string
		pass                int
	}
	by := map[pk]result{}
	group := map[[2]string][]result{}
	for _, r := range results {
		if !slices.Contains(s.scenarios, r.Scenario) {
			s.scenarios = append(s.scenarios, r.Scenario)
		}
		by[pk{r.Scenario, r.Contender, r.Pass}] = r
		k := [2]string{r.Scenario, r.Contender}
		group[k] = append(group[k], r)
	}
	for k, rs := range group {
		col := func(f func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		same := func(scenario, contender string, f func(r, o result) float64) float64 {
			return col(func(r result) float64 {
				o, ok := by[pk{scenario, contender, r.Pass}]
				if !ok {
					return math.NaN()
				}
				return f(r, o)
			})
		}
		perSec := func(r result) float64 { return float64(r.Handovers) / r.Seconds }
		w := &row{
			scenario: k[0], contender: k[1], passes: len(rs),
			rate:      col(result.rate),
			p50:       col(func(r result) float64 { return r.P50us }),
			p99:       col(func(r result) float64 { return r.P99us }),
			mean:      col(func(r result) float64 { return r.MeanUs }),
			allocs:    col(func(r result) float64 { return r.Allocs }),
			bytes:     col(func(r result) float64 { return r.Bytes }),
			cpu:       col(func(r result) float64 { return r.CPUus }),
			srvCPU:    col(func(r result) float64 { return r.SrvCPUus }),
			handovers: col(perSec),
			minShare:  col(func(r result) float64 { return r.MinShare }),
			errors:    col(func(r result) float64 { return float64(r.Errors) }),
		}
		floorScenario := k[0]
		if k[0] == "frozen 1 of 5" {
			floorScenario = "frozen 1 of 5"
		}
		w.ratio = same(floorScenario, "floor", func(r, o result) float64 { return r.rate() / o.rate() })
		w.hoVsRedsync = same(k[0], "redsync", func(r, o result) float64 { return perSec(r) / perSec(o) })
		if k[0] == "frozen 1 of 5" {
			w.frozenVsHealthy = same("healthy n=5", k[1], func(r, o result) float64 { return r.MeanUs / o.MeanUs })
			w.p99VsHealthy = same("healthy n=5", k[1], func(r, o result) float64 { return r.P99us / o.P99us })
		}
		if s.rows[k[0]] == nil {
			s.rows[k[0]] = map[string]*row{}
		}
		s.rows[k[0]][k[1]] = w
	}
	return s
}

func (s *summary) get(scenario, contender string) *row {
	return s.rows[scenario][contender]
}

func num(x float64, format string) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf(format, x)
}

// lat formats microseconds.
func lat(us float64) string {
	switch {
	case math.IsNaN(us):
		return "–"
	case us >= 1e6:
		return fmt.Sprintf("%.2f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.1f ms", us/1e3)
	default:
		return fmt.Sprintf("%.0f µs", us)
	}
}

func (s *summary) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Uncontended and contended cycles\n\n")
	fmt.Fprintf(&b, "Medians over the passes. For contended scenarios, cycles/s are acquisitions/s, latency is a waiter's time to acquire, and the floor is the serial raw cycle on the same nodes (one holder at a time is the most a lock can hand out). \"×floor\" is the median over passes of the ratio to the floor of the same pass.\n\n")
	fmt.Fprintf(&b, "| scenario | contender | cycles/s | ×floor | p50 | p99 | allocs/cycle | B/cycle | client CPU µs/cycle | server CPU µs/cycle | handovers/s | min share | errors |\n")
	fmt.Fprintf(&b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, sc := range s.scenarios {
		if strings.HasPrefix(sc, "healthy") || strings.HasPrefix(sc, "frozen") {
			continue
		}
		for _, c := range contenderOrder {
			r := s.get(sc, c)
			if r == nil {
				if c == "redislock" && strings.HasSuffix(sc, "n=5") {
					fmt.Fprintf(&b, "| %s | %s | n/a (single node only) | | | | | | | | | | |\n", sc, c)
				}
				continue
			}
			ho, share := "", ""
			if strings.HasPrefix(sc, "contended") && c != "floor" {
				ho, share = num(r.handovers, "%.0f"), num(r.minShare, "%.2f")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				sc, c, num(r.rate, "%.0f"), num(r.ratio, "%.3f"), lat(r.p50), lat(r.p99),
				num(r.allocs, "%.1f"), num(r.bytes, "%.0f"), num(r.cpu, "%.1f"), num(r.srvCPU, "%.1f"), ho, share, num(r.errors, "%.0f"))
		}
	}
	if s.rows["frozen 1 of 5"] != nil {
		fmt.Fprintf(&b, "\n### One node of five frozen (SIGSTOP)\n\n")
		fmt.Fprintf(&b, "Serial lock-and-unlock cycles; each pass measures the healthy cycle right before freezing the node. Ratios are medians over passes of frozen ÷ healthy of the same pass.\n\n")
		fmt.Fprintf(&b, "| contender | passes | healthy mean | frozen mean | frozen ÷ healthy (mean) | healthy p99 | frozen p99 | frozen ÷ healthy (p99) | frozen cycles/s | errors |\n")
		fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, c := range contenderOrder {
			f, h := s.get("frozen 1 of 5", c), s.get("healthy n=5", c)
			if f == nil || h == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", c, f.passes,
				lat(h.mean), lat(f.mean), num(f.frozenVsHealthy, "%.2f"), lat(h.p99), lat(f.p99),
				num(f.p99VsHealthy, "%.2f"), num(f.rate, "%.1f"), num(f.errors, "%.0f"))
		}
	}
	fmt.Fprintf(&b, "\n### Targets\n\n| target | measured | |\n|---|---|---|\n")
	for _, t := range s.targets() {
		mark := "met"
		if !t.met {
			mark = "**missed**"
		}
		if t.na {
			mark = "not measured"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.name, t.measured, mark)
	}
	return b.String()
}

type target struct {
	name, measured string
	met, na        bool
}

func (s *summary) targets() []target {
	var ts []target
	ratio := func(sc string, want float64) {
		r := s.get(sc, "redlock")
		t := target{name: fmt.Sprintf("%s: redlock ≥ %.2f × floor cycles/s", sc, want)}
		if r == nil || math.IsNaN(r.ratio) {
			t.na = true
		} else {
			t.measured = fmt.Sprintf("%.3f", r.ratio)
			t.met = r.ratio >= want
		}
		ts = append(ts, t)
	}
	// Issue 13's targets for the plain cycle.
	ratio("serial n=1", 0.90)
	ratio("parallel64 n=1", 0.80)
	ratio("serial n=5", 0.80)
	ratio("parallel64 n=5", 0.80)
	// Against the peers (ratios of the median rates): more cycles/s than
	// every peer on five nodes, within 10% of redislock on one.
	peers := func(sc, peer string, want float64, what string) {
		r, o := s.get(sc, "redlock"), s.get(sc, peer)
		t := target{name: fmt.Sprintf("%s: redlock cycles/s %s %s's", sc, what, peer)}
		if r == nil || o == nil || o.rate == 0 {
			t.na = true
		} else {
			t.measured = fmt.Sprintf("%.0f against %.0f (%.2f×)", r.rate, o.rate, r.rate/o.rate)
			t.met = r.rate/o.rate >= want
		}
		ts = append(ts, t)
	}
	peers("serial n=5", "redsync", 1, "above")
	peers("parallel64 n=5", "redsync", 1, "above")
	peers("serial n=1", "redislock", 0.9, "within 10% of")
	peers("parallel64 n=1", "redislock", 0.9, "within 10% of")
	for _, sc := range []string{"serial n=1", "parallel64 n=1", "serial n=5", "parallel64 n=5"} {
		r, f := s.get(sc, "redlock"), s.get(sc, "floor")
		t := target{name: sc + ": redlock server CPU/cycle ≤ 1.3 × floor's"}
		if r == nil || f == nil || f.srvCPU == 0 {
			t.na = true
		} else {
			t.measured = fmt.Sprintf("%.1f against %.1f µs (%.2f×)", r.srvCPU, f.srvCPU, r.srvCPU/f.srvCPU)
			t.met = r.srvCPU <= 1.3*f.srvCPU
		}
		ts = append(ts, t)
	}
	if f := s.get("frozen 1 of 5", "redlock"); f != nil {
		ts = append(ts, target{
			name:     "one frozen node of five: redlock cycle ≤ 1.2 × healthy 5-node cycle (mean)",
			measured: fmt.Sprintf("%.2f (p99 %.2f)", f.frozenVsHealthy, f.p99VsHealthy),
			met:      f.frozenVsHealthy <= 1.2,
		})
	} else {
		ts = append(ts, target{name: "one frozen node of five", na: true})
	}
	for _, sc := range s.scenarios {
		if !strings.HasPrefix(sc, "contended") {
			continue
		}
		r := s.get(sc, "redlock")
		t := target{name: sc + ": redlock handovers/s ≥ 50 × redsync's"}
		if r == nil || math.IsNaN(r.hoVsRedsync) {
			t.na = true
			if r != nil && r.handovers > 0 {
				t.measured = fmt.Sprintf("%.0f/s against 0/s", r.handovers)
				t.na, t.met = false, true
			}
		} else {
			t.measured = fmt.Sprintf("%.0f×", r.hoVsRedsync)
			t.met = r.hoVsRedsync >= 50
		}
		ts = append(ts, t)
	}
	for _, sc := range s.scenarios {
		if strings.HasPrefix(sc, "contended") || strings.HasPrefix(sc, "frozen") || strings.HasPrefix(sc, "healthy") {
			continue
		}
		r := s.get(sc, "redlock")
		if r == nil {
			continue
		}
		t := target{name: sc + ": redlock allocs/cycle ≤ redsync's", met: true}
		parts := []string{fmt.Sprintf("redlock %.1f", r.allocs)}
		for _, c := range []string{"redsync", "redislock"} {
			if o := s.get(sc, c); o != nil {
				parts = append(parts, fmt.Sprintf("%s %.1f", c, o.allocs))
				if c == "redsync" {
					t.met = t.met && r.allocs <= o.allocs
				}
			}
		}
		t.measured = strings.Join(parts, ", ")
		ts = append(ts, t)
	}
	return ts
}

// ---- charts ----

var colors = map[string]string{"floor": "#8c8c8c", "redlock": "#1f77b4", "redsync": "#d62728", "redislock": "#2ca02c"}

func (s *summary) charts(dir string) error {
	var groups []string
	for _, sc := range s.scenarios {
		if sc != "healthy n=5" {
			groups = append(groups, sc)
		}
	}
	vals := func(groups []string, series []string, f func(*row) float64) [][]float64 {
		v := make([][]float64, len(groups))
		for i, g := range groups {
			v[i] = make([]float64, len(series))
			for j, c := range series {
				v[i][j] = math.NaN()
				if r := s.get(g, c); r != nil {
					v[i][j] = f(r)
				}
			}
		}
		return v
	}
	charts := map[string]string{
		"throughput.svg": barChart(chart{
			title:  "Cycles/s as a ratio to the raw floor of the same pass (median over passes; contended: acquisitions/s over the serial floor)",
			groups: groups, series: contenderOrder,
			vals:   vals(groups, contenderOrder, func(r *row) float64 { return r.ratio }),
			yLabel: "× floor", format: func(x float64) string { return fmt.Sprintf("%.2f", x) },
			ref: 1,
		}),
		"p99.svg": barChart(chart{
			title:  "p99 latency: a whole cycle, or a waiter's time to acquire when contended (log scale)",
			groups: groups, series: contenderOrder,
			vals: vals(groups, contenderOrder, func(r *row) float64 { return r.p99 }),
			log:  true, yLabel: "p99 latency", format: lat,
		}),
	}
	var contendedGroups []string
	for _, g := range groups {
		if strings.HasPrefix(g, "contended") {
			contendedGroups = append(contendedGroups, g)
		}
	}
	if len(contendedGroups) > 0 {
		libs := contenderOrder[1:]
		charts["handovers.svg"] = barChart(chart{
			title:  "Contended: handovers to another goroutine per second (log scale)",
			groups: contendedGroups, series: libs,
			vals: vals(contendedGroups, libs, func(r *row) float64 { return r.handovers }),
			log:  true, yLabel: "handovers/s", format: func(x float64) string { return fmt.Sprintf("%.0f", x) },
		})
	}
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

type chart struct {
	title          string
	groups, series []string
	vals           [][]float64 // [group][series]; NaN: not measured
	log            bool
	yLabel         string
	format         func(float64) string
	ref            float64 // a dashed reference line; 0: none
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// barChart draws a grouped bar chart by hand: one group per scenario, one
// bar per contender, the value above each bar.
func barChart(c chart) string {
	const (
		barW, gap          = 22.0, 26.0
		left, right        = 70.0, 20.0
		top, plotH, bottom = 60.0, 300.0, 90.0
	)
	groupW := max(barW*float64(len(c.series))+gap, 120)
	width := max(left+right+groupW*float64(len(c.groups)), left+20+7.8*float64(len([]rune(c.title))))
	height := top + plotH + bottom

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range c.vals {
		for _, v := range g {
			if !math.IsNaN(v) && v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	var y func(float64) float64
	var ticks []float64
	if c.log {
		a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if a == b {
			b++
		}
		y = func(v float64) float64 { return top + plotH - (math.Log10(v)-a)/(b-a)*plotH }
		for e := a; e <= b; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		hi = max(hi, c.ref) * 1.1
		step := niceStep(hi / 5)
		hi = math.Ceil(hi/step) * step
		y = func(v float64) float64 { return top + plotH - v/hi*plotH }
		for t := 0.0; t <= hi+step/2; t += step {
			ticks = append(ticks, t)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="13" font-weight="bold">%s</text>`+"\n", left, esc(c.title))
	// Legend.
	x := left
	for _, s := range c.series {
		fmt.Fprintf(&b, `<rect x="%.0f" y="32" width="12" height="12" fill="%s"/><text x="%.0f" y="42">%s</text>`+"\n", x, colors[s], x+16, s)
		x += 90
	}
	// Axis and grid.
	for _, t := range ticks {
		ty := y(t)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, width-right, ty, ty)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, ty+4, esc(c.format(t)))
	}
	fmt.Fprintf(&b, `<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">%s</text>`+"\n", top+plotH/2, top+plotH/2, esc(c.yLabel))
	if c.ref > 0 {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#444" stroke-dasharray="4 3"/>`+"\n", left, width-right, y(c.ref), y(c.ref))
	}
	base := top + plotH
	for i, g := range c.groups {
		gx := left + float64(i)*groupW + (groupW-barW*float64(len(c.series)))/2
		for j, s := range c.series {
			v := c.vals[i][j]
			bx := gx + float64(j)*barW
			if math.IsNaN(v) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#999" font-size="9">n/a</text>`+"\n", bx+barW/2, base-4)
				continue
			}
			by := base
			if v > 0 {
				by = max(y(v), top)
			}
			if c.log && v > 0 && by > base {
				by = base
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				bx+1, by, barW-2, base-by, colors[s], esc(g), s, esc(c.format(v)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="start" font-size="9" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
				bx+barW/2+3, by-3, bx+barW/2+3, by-3, esc(c.format(v)))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", left+float64(i)*groupW+groupW/2, base+18, esc(g))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#000"/>`+"\n", left, width-right, base, base)
	b.WriteString("</svg>\n")
	return b.String()
}

func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

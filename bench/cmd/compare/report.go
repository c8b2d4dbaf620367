package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// contenderOrder is the order of the rows: the go-redis contenders on the
// recommended configuration, then on go-redis's defaults, then on rueidis.
var contenderOrder = []string{
	"floor/ctx", "redlock/ctx", "redsync/ctx", "redislock/ctx",
	"floor/defaults", "redlock/defaults", "redsync/defaults", "redislock/defaults",
	"floor/rueidis", "redlock/rueidis", "rueidislock",
}

// singleNode are the contenders that have no rows on several nodes, and why.
var singleNode = map[string]string{
	"redislock/ctx":      "n/a (single node only)",
	"redislock/defaults": "n/a (single node only)",
	"floor/rueidis":      "n/a (the rueidis floor runs on one node only)",
	"rueidislock":        "n/a (one deployment only)",
}

// confOf is the client configuration of a row: "ctx" or "defaults" on
// go-redis, "rueidis" for the rows on a rueidis client, rueidislock's
// included.
func confOf(contender string) string {
	if _, cf, ok := strings.Cut(contender, "/"); ok {
		return cf
	}
	if contender == "rueidislock" {
		return string(confRueidis)
	}
	return string(confCtx)
}

// sameConf is library lib's row on contender's go-redis configuration.
func sameConf(lib, contender string) string { return lib + "/" + confOf(contender) }

// legacyName maps the names of results.json files written before the
// harness ran two go-redis configurations: they all ran on "/ctx".
func legacyName(contender string) string {
	switch contender {
	case "floor", "redlock", "redsync", "redislock":
		return contender + "/" + string(confCtx)
	}
	return contender
}

// row is the summary of one contender in one scenario: medians over the
// passes.
type row struct {
	scenario, contender string
	config              string
	passes              int
	rate, p50, p99      float64
	mean                float64
	allocs, bytes, cpu  float64
	srvCPU              float64
	handovers, minShare float64
	errors              float64
	ratio               float64 // to the floor on the same configuration, same pass
	frozenVsHealthy     float64 // mean frozen cycle over mean healthy cycle, same pass
	p99VsHealthy        float64
}

type passKey struct {
	scenario, contender string
	pass                int
}

type summary struct {
	scenarios  []string
	contenders []string                   // in contenderOrder, then any other in order of appearance
	rows       map[string]map[string]*row // scenario → contender
	by         map[passKey]result
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

func rateOf(r result) float64      { return r.rate() }
func handoversOf(r result) float64 { return float64(r.Handovers) / r.Seconds }
func allocsOf(r result) float64    { return r.Allocs }
func srvCPUOf(r result) float64    { return r.SrvCPUus }

func summarize(results []result) *summary {
	s := &summary{rows: map[string]map[string]*row{}, by: map[passKey]result{}}
	group := map[[2]string][]result{}
	var seen []string
	for _, r := range results {
		if !slices.Contains(s.scenarios, r.Scenario) {
			s.scenarios = append(s.scenarios, r.Scenario)
		}
		if !slices.Contains(seen, r.Contender) {
			seen = append(seen, r.Contender)
		}
		s.by[passKey{r.Scenario, r.Contender, r.Pass}] = r
		k := [2]string{r.Scenario, r.Contender}
		group[k] = append(group[k], r)
	}
	for _, c := range contenderOrder {
		if slices.Contains(seen, c) {
			s.contenders = append(s.contenders, c)
		}
	}
	for _, c := range seen {
		if !slices.Contains(contenderOrder, c) {
			s.contenders = append(s.contenders, c)
		}
	}
	for k, rs := range group {
		col := func(f func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		w := &row{
			scenario: k[0], contender: k[1], config: rs[0].Config, passes: len(rs),
			rate:      col(rateOf),
			p50:       col(func(r result) float64 { return r.P50us }),
			p99:       col(func(r result) float64 { return r.P99us }),
			mean:      col(func(r result) float64 { return r.MeanUs }),
			allocs:    col(allocsOf),
			bytes:     col(func(r result) float64 { return r.Bytes }),
			cpu:       col(func(r result) float64 { return r.CPUus }),
			srvCPU:    col(srvCPUOf),
			handovers: col(handoversOf),
			minShare:  col(func(r result) float64 { return r.MinShare }),
			errors:    col(func(r result) float64 { return float64(r.Errors) }),
		}
		w.ratio = s.passRatio(k[0], k[1], k[0], sameConf("floor", k[1]), rateOf)
		if k[0] == "frozen 1 of 5" {
			w.frozenVsHealthy = s.passRatio(k[0], k[1], "healthy n=5", k[1], func(r result) float64 { return r.MeanUs })
			w.p99VsHealthy = s.passRatio(k[0], k[1], "healthy n=5", k[1], func(r result) float64 { return r.P99us })
		}
		if s.rows[k[0]] == nil {
			s.rows[k[0]] = map[string]*row{}
		}
		s.rows[k[0]][k[1]] = w
	}
	return s
}

// passRatio is the median over the passes of f(a's case) / f(b's case) of
// the same pass, where a is contender a in scenario sa and b contender b in
// scenario sb; NaN when no pass has both.
func (s *summary) passRatio(sa, a, sb, b string, f func(result) float64) float64 {
	var xs []float64
	for k, r := range s.by {
		if k.scenario != sa || k.contender != a {
			continue
		}
		if o, ok := s.by[passKey{sb, b, k.pass}]; ok {
			xs = append(xs, f(r)/f(o))
		}
	}
	return median(xs)
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
	fmt.Fprintf(&b, "Medians over the passes. A go-redis contender's row is named by its client configuration: \"/ctx\" is `ContextTimeoutEnabled: true, MaxRetries: -1`, \"/defaults\" is go-redis's default options; \"/rueidis\" is a rueidis client with its default options (auto-pipelining), redlock through its rueidis driver; rueidislock runs on rueidis too. For contended scenarios, cycles/s are acquisitions/s, latency is a waiter's time to acquire, and the floor is the serial raw cycle on the same nodes (one holder at a time is the most a lock can hand out). \"×floor\" is the median over passes of the ratio to the floor on the same client configuration in the same pass (the rueidis floor runs on one node only).\n\n")
	fmt.Fprintf(&b, "| scenario | contender | cycles/s | ×floor | p50 | p99 | allocs/cycle | B/cycle | client CPU µs/cycle | server CPU µs/cycle | handovers/s | min share | errors | configuration |\n")
	fmt.Fprintf(&b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, sc := range s.scenarios {
		if strings.HasPrefix(sc, "healthy") || strings.HasPrefix(sc, "frozen") {
			continue
		}
		for _, c := range s.contenders {
			r := s.get(sc, c)
			if r == nil {
				if why, ok := singleNode[c]; ok && strings.HasSuffix(sc, "n=5") {
					fmt.Fprintf(&b, "| %s | %s | %s | | | | | | | | | | | |\n", sc, c, why)
				}
				continue
			}
			ho, share := "", ""
			if strings.HasPrefix(sc, "contended") && !strings.HasPrefix(c, "floor") {
				ho, share = num(r.handovers, "%.0f"), num(r.minShare, "%.2f")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				sc, c, num(r.rate, "%.0f"), num(r.ratio, "%.3f"), lat(r.p50), lat(r.p99),
				num(r.allocs, "%.1f"), num(r.bytes, "%.0f"), num(r.cpu, "%.1f"), num(r.srvCPU, "%.1f"), ho, share, num(r.errors, "%.0f"), configText(r.config))
		}
	}
	if s.rows["frozen 1 of 5"] != nil {
		fmt.Fprintf(&b, "\n### One node of five frozen (SIGSTOP)\n\n")
		fmt.Fprintf(&b, "Serial lock-and-unlock cycles; each pass measures the healthy cycle right before freezing the node. Ratios are medians over passes of frozen ÷ healthy of the same pass.\n\n")
		fmt.Fprintf(&b, "| contender | passes | healthy mean | frozen mean | frozen ÷ healthy (mean) | healthy p99 | frozen p99 | frozen ÷ healthy (p99) | frozen cycles/s | errors |\n")
		fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, c := range s.contenders {
			f, h := s.get("frozen 1 of 5", c), s.get("healthy n=5", c)
			if f == nil || h == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", c, f.passes,
				lat(h.mean), lat(f.mean), num(f.frozenVsHealthy, "%.2f"), lat(h.p99), lat(f.p99),
				num(f.p99VsHealthy, "%.2f"), num(f.rate, "%.1f"), num(f.errors, "%.0f"))
		}
	}
	fmt.Fprintf(&b, "\n### Targets (issue 50)\n\n")
	fmt.Fprintf(&b, "The issue's targets that this harness measures: on go-redis's default options, on the rueidis driver, then for redlock on every client configuration (on rueidis, the 5-node server CPU is compared with redsync/ctx, redsync having no rueidis client here). Ratios are medians over passes of the ratio of two cases of the same pass. A first obtain within 1.5 × the second, 8 segments against one lock and the heap per held lock are measured by the root package's benchmarks, not here.\n\n")
	fmt.Fprintf(&b, "| target | measured | |\n|---|---|---|\n")
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

// configText is a row's configuration as its table prints it.
func configText(c string) string {
	if c == "" {
		return "not recorded"
	}
	return strings.ReplaceAll(c, "|", `\|`)
}

type target struct {
	name, measured string
	met, na        bool
}

// compare checks that contender a's f in scenario sc is at least (or at
// most, with atMost) factor × contender b's, as the median over passes of
// the ratio of the two cases of the same pass.
func (s *summary) compare(sc, a, b string, factor float64, atMost bool, what string, f func(result) float64, med func(*row) float64) target {
	rel := "≥"
	if atMost {
		rel = "≤"
	}
	fac := ""
	if factor != 1 {
		fac = fmt.Sprintf("%g × ", factor)
	}
	t := target{name: fmt.Sprintf("%s: %s %s %s %s%s's", sc, a, what, rel, fac, b)}
	ra, rb := s.get(sc, a), s.get(sc, b)
	x := s.passRatio(sc, a, sc, b, f)
	if ra == nil || rb == nil || math.IsNaN(x) {
		t.na = true
		return t
	}
	t.measured = fmt.Sprintf("%s against %s (%s)", value(med(ra)), value(med(rb)), ratioText(x))
	if atMost {
		t.met = x <= factor
	} else {
		t.met = x >= factor
	}
	return t
}

// value formats a measured figure: whole above 100, else to a tenth.
func value(x float64) string {
	if math.Abs(x) >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

func ratioText(x float64) string {
	if math.IsInf(x, 1) {
		return "the other's is 0"
	}
	return fmt.Sprintf("%.2f×", x)
}

// targets are issue 26's, for redlock on each client configuration, and
// its goal for go-redis's default options: as cheap as the recommended
// configuration.
func (s *summary) targets() []target {
	var ts []target
	rateRow := func(r *row) float64 { return r.rate }
	srvRow := func(r *row) float64 { return r.srvCPU }
	allocRow := func(r *row) float64 { return r.allocs }
	atLeast := func(sc, a, b string, factor float64) {
		ts = append(ts, s.compare(sc, a, b, factor, false, "cycles/s", rateOf, rateRow))
	}
	d, c, r := rowName("redlock", confDefaults), rowName("redlock", confCtx), rowName("redlock", confRueidis)
	uncontended := []string{"serial n=1", "parallel64 n=1", "serial n=5", "parallel64 n=5"}

	// On go-redis's default options.
	atLeast("serial n=1", d, rowName("redislock", confDefaults), 1)
	atLeast("serial n=1", d, "rueidislock", 1)
	atLeast("serial n=1", d, rowName("floor", confDefaults), 0.85)
	atLeast("parallel64 n=1", d, "rueidislock", 1)
	atLeast("serial n=5", d, rowName("redsync", confDefaults), 1)
	atLeast("parallel64 n=5", d, rowName("redsync", confDefaults), 1)
	for _, sc := range uncontended {
		atLeast(sc, d, c, 0.95)
	}
	// On the rueidis driver: every cell on one node.
	for _, sc := range []string{"serial n=1", "parallel64 n=1", "contended8 n=1", "contended64 n=1"} {
		atLeast(sc, r, "rueidislock", 1)
	}
	// Everywhere: each configuration of redlock.
	for _, cf := range append(slices.Clone(confs), confRueidis) {
		rl := rowName("redlock", cf)
		ts = append(ts, s.compare("parallel64 n=1", rl, "rueidislock", 1, true, "server CPU/cycle", srvCPUOf, srvRow))
		// redsync runs on go-redis only: the rueidis row is compared
		// with redsync/ctx.
		rs := rowName("redsync", cf)
		if cf == confRueidis {
			rs = rowName("redsync", confCtx)
		}
		ts = append(ts, s.compare("serial n=5", rl, rs, 1.2, true, "server CPU/cycle", srvCPUOf, srvRow))
		if cf != confRueidis {
			for _, sc := range uncontended[:2] {
				ts = append(ts, s.compare(sc, rl, rowName("redislock", cf), 1, true, "allocs/cycle", allocsOf, allocRow))
			}
		}
		for _, sc := range []string{"contended8 n=1", "contended64 n=1"} {
			ts = append(ts, s.compare(sc, rl, "rueidislock", 1, false, "handovers/s", handoversOf, func(r *row) float64 { return r.handovers }))
		}
		t := target{name: "one frozen node of five: " + rl + " cycle ≤ 1.2 × healthy 5-node cycle (mean)"}
		if f := s.get("frozen 1 of 5", rl); f != nil && !math.IsNaN(f.frozenVsHealthy) {
			t.measured = fmt.Sprintf("%.2f (p99 %.2f)", f.frozenVsHealthy, f.p99VsHealthy)
			t.met = f.frozenVsHealthy <= 1.2
		} else {
			t.na = true
		}
		ts = append(ts, t)
	}
	return ts
}

// ---- charts ----

// colors give each library a hue, dark on "/ctx" and light on "/defaults".
var colors = map[string]string{
	"floor/ctx": "#7f7f7f", "floor/defaults": "#c7c7c7",
	"redlock/ctx": "#1f77b4", "redlock/defaults": "#aec7e8",
	"redsync/ctx": "#d62728", "redsync/defaults": "#ff9896",
	"redislock/ctx": "#2ca02c", "redislock/defaults": "#98df8a",
	"floor/rueidis": "#8c564b", "redlock/rueidis": "#17becf",
	"rueidislock": "#9467bd",
}

func colorOf(contender string) string {
	if c, ok := colors[contender]; ok {
		return c
	}
	return "#000000"
}

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
			title:  "Cycles/s as a ratio to the raw floor on the same go-redis configuration, same pass (median over passes; contended: acquisitions/s over the serial floor)",
			groups: groups, series: s.contenders,
			vals:   vals(groups, s.contenders, func(r *row) float64 { return r.ratio }),
			yLabel: "× floor", format: func(x float64) string { return fmt.Sprintf("%.2f", x) },
			ref: 1,
		}),
		"p99.svg": barChart(chart{
			title:  "p99 latency: a whole cycle, or a waiter's time to acquire when contended (log scale)",
			groups: groups, series: s.contenders,
			vals: vals(groups, s.contenders, func(r *row) float64 { return r.p99 }),
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
		libs := slices.DeleteFunc(slices.Clone(s.contenders), func(c string) bool { return strings.HasPrefix(c, "floor") })
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
		fmt.Fprintf(&b, `<rect x="%.0f" y="32" width="12" height="12" fill="%s"/><text x="%.0f" y="42">%s</text>`+"\n", x, colorOf(s), x+16, s)
		x += 30 + 6.5*float64(len(s))
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
				bx+1, by, barW-2, base-by, colorOf(s), esc(g), s, esc(c.format(v)))
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

package main

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// res is a case of one pass with the given cycles/s over one second.
func res(scenario, contender string, pass int, rate float64) result {
	return result{Scenario: scenario, Contender: contender, Pass: pass, Cycles: uint64(rate), Seconds: 1}
}

func TestRatioIsToTheFloorOnTheSameConfiguration(t *testing.T) {
	const sc = "serial n=1"
	var rs []result
	for pass := range 3 {
		rs = append(rs,
			res(sc, "floor/ctx", pass, 1000),
			res(sc, "floor/defaults", pass, 500),
			res(sc, "redlock/ctx", pass, 800),
			res(sc, "redlock/defaults", pass, 400),
			res(sc, "floor/rueidis", pass, 1500),
			res(sc, "redlock/rueidis", pass, 1350),
			res(sc, "rueidislock", pass, 1200),
		)
	}
	s := summarize(rs)
	for c, want := range map[string]float64{
		"redlock/ctx":      0.8,
		"redlock/defaults": 0.8,
		"redlock/rueidis":  0.9,
		"rueidislock":      0.8, // against floor/rueidis
		"floor/defaults":   1,
	} {
		if got := s.get(sc, c).ratio; math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: ratio %v, want %v", c, got, want)
		}
	}
}

func TestPassRatioPairsCasesOfTheSamePass(t *testing.T) {
	const sc = "serial n=1"
	// The machine slows down pass by pass; redlock is 0.9 × the floor in
	// each pass, which the ratio of the medians (600/1000) would hide.
	rs := []result{
		res(sc, "floor/ctx", 0, 1000), res(sc, "redlock/ctx", 0, 900),
		res(sc, "floor/ctx", 1, 600), res(sc, "redlock/ctx", 1, 540),
		res(sc, "floor/ctx", 2, 200), res(sc, "redlock/ctx", 2, 180),
		res(sc, "redlock/ctx", 3, 100), // no floor in pass 3: not paired
	}
	s := summarize(rs)
	if got := s.passRatio(sc, "redlock/ctx", sc, "floor/ctx", rateOf); math.Abs(got-0.9) > 1e-9 {
		t.Errorf("passRatio %v, want 0.9", got)
	}
	if got := s.passRatio(sc, "redlock/ctx", sc, "redsync/ctx", rateOf); !math.IsNaN(got) {
		t.Errorf("passRatio against a contender that did not run: %v, want NaN", got)
	}
}

func TestLegacyNamesAreTheCtxConfiguration(t *testing.T) {
	for in, want := range map[string]string{
		"floor": "floor/ctx", "redlock": "redlock/ctx", "redsync": "redsync/ctx", "redislock": "redislock/ctx",
		"redlock/defaults": "redlock/defaults", "rueidislock": "rueidislock",
	} {
		if got := legacyName(in); got != want {
			t.Errorf("legacyName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTargetsPerConfiguration(t *testing.T) {
	var rs []result
	for pass := range 5 {
		for _, sc := range []string{"serial n=1", "parallel64 n=1"} {
			rs = append(rs,
				res(sc, "floor/ctx", pass, 1000), res(sc, "redlock/ctx", pass, 950),
				res(sc, "floor/defaults", pass, 1000), res(sc, "redlock/defaults", pass, 800),
				res(sc, "redsync/ctx", pass, 900), res(sc, "rueidislock", pass, 1100),
			)
		}
		rl, peer := res("serial n=1", "redlock/ctx", pass, 950), res("serial n=1", "redislock/ctx", pass, 1000)
		rs = slices.DeleteFunc(rs, func(r result) bool { return r.Scenario == rl.Scenario && r.Contender == rl.Contender && r.Pass == pass })
		rl.Allocs, peer.Allocs = 40, 34
		rs = append(rs, rl, peer)
	}
	s := summarize(rs)
	got := map[string]target{}
	for _, tg := range s.targets() {
		got[tg.name] = tg
	}
	for name, want := range map[string]bool{
		"serial n=1: redlock/defaults cycles/s ≥ 0.85 × floor/defaults's": false,
		"serial n=1: redlock/defaults cycles/s ≥ rueidislock's":           false, // rueidislock is faster
		"serial n=1: redlock/defaults cycles/s ≥ 0.95 × redlock/ctx's":    false,
		"parallel64 n=1: redlock/defaults cycles/s ≥ rueidislock's":       false,
		"serial n=1: redlock/ctx allocs/cycle ≤ redislock/ctx's":          false,
	} {
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q", name)
			continue
		}
		if tg.na || tg.met != want {
			t.Errorf("%q: met %v, not measured %v (%s); want met %v", name, tg.met, tg.na, tg.measured, want)
		}
	}
	if tg := got["serial n=1: redlock/defaults cycles/s ≥ rueidislock's"]; !strings.Contains(tg.measured, "800 against 1100") {
		t.Errorf("the target against rueidislock does not give both rates: %q", tg.measured)
	}
	if tg := got["serial n=5: redlock/defaults cycles/s ≥ redsync/defaults's"]; !tg.na {
		t.Errorf("a scenario that did not run is measured: %+v", tg)
	}
}

func TestTablesPrintTheRunAndEachRowsConfiguration(t *testing.T) {
	r := res("serial n=1", "redlock/ctx", 0, 800)
	r.Config = "redlock defaults; go-redis ContextTimeoutEnabled"
	old := res("serial n=1", "redsync/ctx", 0, 700) // written before rows had one
	rs := results{Go: "go1.26.8", CPUs: 2, Args: []string{"-d", "3s"}, Redis: "7.0.15",
		LoadStart: "0.10 0.20 0.30", Results: []result{r, old}}
	md := rs.header() + summarize(rs.Results).markdown()
	for _, want := range []string{
		"Run: go1.26.8, 2 CPUs, Redis 7.0.15, arguments `-d 3s`; load average (1, 5, 15 min) 0.10 0.20 0.30 at the start, not recorded at the end.",
		"| 0 | redlock defaults; go-redis ContextTimeoutEnabled |",
		"| redsync/ctx | 700 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("tables lack %q:\n%s", want, md)
		}
	}
	if !strings.Contains(md[strings.Index(md, "| serial n=1 | redsync/ctx"):], "| not recorded |") {
		t.Errorf("a row without a configuration does not say so:\n%s", md)
	}
}

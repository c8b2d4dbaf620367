package model

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	power       = flag.String("power", "", "TestSearchPower: measure how many schedules each matching mutant's random search needs (a regexp of mutant names)")
	powerSeeds  = flag.Int("powerseeds", 40, "TestSearchPower: seeds per mutant")
	powerBudget = flag.Int("powerbudget", 0, "TestSearchPower: schedules per seed (0: three times the mutant's budget)")
	powerSearch = flag.String("powersearch", "", "TestSearchPower: run every matching mutant on these searches instead of its own (comma-separated)")
	powerFence  = flag.Int64("powerfence", 0, "TestSearchPower: the searches' FenceTTL (0: theirs)")
	powerFixed  = flag.Bool("powerfixed", false, "TestSearchPower: the seeds k<<32, k = 1..powerseeds (fixedSeeds), not drawn at random")
)

// fixedSeeds are n fixed seeds, far enough apart that their searches play
// no schedule twice: k<<32 for k = 1..n.
func fixedSeeds(n int) []uint64 {
	out := make([]uint64, n)
	for k := range out {
		out[k] = uint64(k+1) << 32
	}
	return out
}

// replaySeed is the seed from which a search of m replays the schedule
// that the search from seed found as its n-th (1-based): schedule i plays
// seed + i in strategy i % m.modes(), so the replay starts at the first
// schedule of that strategy's round and finds it within m.modes()
// schedules.
func replaySeed(m *Model, seed uint64, n int) uint64 {
	i := uint64(n - 1)
	return seed + i - i%uint64(m.modes())
}

// TestSearchPower measures, for each mutant whose name matches -power, how
// many schedules its search plays before it finds a counterexample, from
// -powerseeds seeds drawn at random: the numbers that the searches'
// budgets rest on (docs/fencing.md, "Checked by the model checker"). It
// runs only with -power, and fails nothing: it reports.
//
//	go test ./internal/model -run TestSearchPower -args -power 'Rule2|Reentry' -powerseeds 100
func TestSearchPower(t *testing.T) {
	if *power == "" {
		t.Skip("with -power only")
	}
	re := regexp.MustCompile(*power)
	searches := map[string]search{}
	for _, table := range []map[string]search{searchTable(), permitSearches(), jointSearches(), handoffSearches(), unifiedSearches()} {
		for k, v := range table {
			searches[k] = v
		}
	}
	var mutants []mutant
	for _, table := range [][]mutant{mutantTable(), permitMutants(), jointMutants(), handoffMutants(), unifiedMutantTable(), unifiedMeasured()} {
		mutants = append(mutants, table...)
	}
	for _, mt := range mutants {
		if !re.MatchString(mt.name) {
			continue
		}
		names := []string{mt.search}
		if *powerSearch != "" {
			names = strings.Split(*powerSearch, ",")
		}
		for _, name := range names {
			mt.search = name
			measure(t, searches[name], mt)
		}
	}
}

// measure runs mutant mt's search s from -powerseeds seeds and reports.
func measure(t *testing.T, s search, mt mutant) {
	if s.random == 0 {
		return
	}
	budget := *powerBudget
	if budget == 0 {
		budget = 3 * max(mt.budget, s.random)
	}
	cfg := s.cfg()
	cfg.Mut = mt.mut
	if *powerFence != 0 {
		cfg.FenceTTL = *powerFence
	}
	m := New(cfg)
	m.NoShrink = true
	m.Swarm = s.swarm
	m.Only = mt.only
	m.Aim = s.aim
	seeds := make([]uint64, *powerSeeds)
	for i := range seeds {
		seeds[i] = rand.Uint64() >> 1
	}
	if *powerFixed {
		seeds = fixedSeeds(*powerSeeds)
	}
	found := make([]int, len(seeds)) // schedules to the first counterexample; 0: none
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ce, st := m.RandomFrom(s.prefix, seeds[i], budget, s.steps, time.Now().Add(time.Hour))
				if ce != nil {
					found[i] = st.Schedules
				}
			}
		}()
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	var hits []int
	var missed []uint64
	best := -1
	for i, n := range found {
		if n > 0 {
			hits = append(hits, n)
			if best < 0 || n < found[best] {
				best = i
			}
		} else {
			missed = append(missed, seeds[i])
		}
	}
	modes := make([]int, m.modes())
	for _, n := range hits {
		modes[(n-1)%m.modes()]++
	}
	slices.Sort(hits)
	sum := 0
	for _, n := range hits {
		sum += n
	}
	line := fmt.Sprintf("%-28s search %-12s budget %6d: found from %d of %d seeds", mt.name, mt.search, budget, len(hits), len(seeds))
	if len(hits) > 0 {
		line += fmt.Sprintf(", schedules mean %d, median %d, p90 %d, max %d", sum/len(hits), hits[len(hits)/2], hits[len(hits)*9/10], hits[len(hits)-1])
	}
	line += fmt.Sprintf(" (by strategy %v)", modes)
	if best >= 0 {
		line += fmt.Sprintf("; fastest: seed %d, %d schedules (replay seed %d)", seeds[best], found[best], replaySeed(m, seeds[best], found[best]))
	}
	if len(missed) > 0 {
		line += fmt.Sprintf("; missed from %v", missed[:min(len(missed), 3)])
	}
	t.Logf("%s (%v)", line, time.Since(start).Round(time.Millisecond))
}

package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketRoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 123456789, 1 << 62} {
		i := bucket(v)
		if lo, hi := lower(i), lower(i+1); v < lo || v >= hi {
			t.Errorf("value %d in bucket %d [%d, %d)", v, i, lo, hi)
		}
	}
}

func TestQuantile(t *testing.T) {
	var h hist
	var all []time.Duration
	for range 100000 {
		d := time.Duration(rand.ExpFloat64() * float64(time.Millisecond))
		h.record(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.99} {
		want := all[int(q*float64(len(all)))-1]
		got := h.quantile(q)
		if r := float64(got) / float64(want); r < 0.96 || r > 1.04 {
			t.Errorf("q%.2f = %v, want about %v", q, got, want)
		}
	}
}

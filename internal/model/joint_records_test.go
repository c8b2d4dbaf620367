package model

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// TestRecordTwinMatchesScript holds the model's record.lua twin
// (recordTwin) to the script on a real redis-server, as
// TestModelMatchesScripts does for the lock's scripts: random keeps and
// floor raises of every field the model knows, with TTLs of a few
// milliseconds and pauses between calls so that fields expire, and after
// each call the script's live fields must be the twin's, run at the
// script's node time.
func TestRecordTwinMatchesScript(t *testing.T) {
	seed := seedOf(t)
	t.Logf("seed %d (replay: %s=%d)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 33))
	srv := redistest.Start(t, 1)[0]
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	node := goredis.New(c)
	ctx := context.Background()
	const key = "{d}:configs"
	var twin *ConfFields
	names := []string{"c:A", "c:B", "j:A:B", "s:A", "s:B", "m:B"}
	cover := map[string]int{}
	for step := range 400 {
		var w RecWrite
		for range rng.IntN(3) {
			w.Keep = append(w.Keep, joint.Keep{Name: names[rng.IntN(len(names))], TTL: 1 + rng.Int64N(40)})
		}
		for range rng.IntN(3) {
			var until int64
			if rng.IntN(4) != 0 {
				until = time.Now().UnixMilli() + rng.Int64N(60) - 10
			}
			w.Raise = append(w.Raise, joint.Raise{Name: names[rng.IntN(len(names))], Ahead: rng.Int64N(30),
				Until: until, TTL: 1 + rng.Int64N(40)})
		}
		var keep []script.RecordField
		var raise []script.FloorRaise
		ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
		for _, k := range w.Keep {
			keep = append(keep, script.RecordField{Name: k.Name, TTL: ms(k.TTL)})
		}
		for _, r := range w.Raise {
			raise = append(raise, script.FloorRaise{Name: r.Name, Ahead: ms(r.Ahead), Until: r.Until, TTL: ms(r.TTL)})
		}
		got, err := script.Record(ctx, node, key, "{d}:epoch", script.Guard{Mode: '0'}, keep, raise)
		if err != nil {
			t.Fatal(err)
		}
		before := twin
		twin = recordTwin(twin, got.Now, &w, false)
		for _, name := range names {
			if before.field(name).Exp > 0 && twin.field(name).Exp == 0 {
				cover["expired"]++
			}
		}
		want := map[string]script.RecordValue{}
		for _, name := range names {
			f := twin.field(name)
			if f.Exp == 0 {
				continue
			}
			want[name] = script.RecordValue{Left: ms(f.Exp - got.Now), Floor: f.M, Fresh: f.V}
			if f.M != 0 {
				cover["live floor"]++
			}
		}
		if len(got.Fields) != len(want) {
			t.Fatalf("step %d (%+v): script %+v, twin %+v", step, w, got.Fields, want)
		}
		for f, v := range want {
			if got.Fields[f] != v {
				t.Fatalf("step %d (%+v): field %s: script %+v, twin %+v", step, w, f, got.Fields[f], v)
			}
		}
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
	}
	t.Logf("cover: %v", cover)
	for _, k := range []string{"live floor", "expired"} {
		if cover[k] == 0 {
			t.Errorf("no step with %s", k)
		}
	}
}

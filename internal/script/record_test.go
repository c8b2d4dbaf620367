package script

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestRecordFloorRises: record.lua's move floor is a maximum that rises
// (issue 33: a floor written once, first writer wins, stayed below later
// grants): M to at least now + ahead, V to at least now + fresh, never
// lower, the field's life to at least M + TTL; a floor written by an
// older library ("expiry:M") is raised the same way and reads as never
// fresh.
func TestRecordFloorRises(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	n := nodeOf(c)
	const key, f = "{p}:configs", "m:B"
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	raise := func(ahead time.Duration, until int64) RecordValue {
		t.Helper()
		r, err := Record(ctx, n, key, "{p}:epoch", Guard{Mode: '0'}, []RecordField{{Name: "j:A:B", TTL: time.Minute}},
			[]FloorRaise{{Name: f, Ahead: ahead, Until: until, TTL: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := r.Fields[f]
		if !ok || r.Fields["j:A:B"].Left <= 0 {
			t.Fatalf("fields after a raise: %+v", r.Fields)
		}
		if v.Floor < r.Now+ahead.Milliseconds() || v.Fresh < until {
			t.Fatalf("raise by %v, until %d at %d: %+v", ahead, until, r.Now, v)
		}
		if want := time.Duration(v.Floor-r.Now)*time.Millisecond + time.Hour; v.Left < want {
			t.Fatalf("floor %d at %d lives %v, want at least %v", v.Floor, r.Now, v.Left, want)
		}
		return v
	}
	a := raise(10*time.Second, ms+2000)
	b := raise(0, ms) // lower: M and V stay
	if b.Floor != a.Floor || b.Fresh != a.Fresh {
		t.Fatalf("a lower raise moved the floor: %+v after %+v", b, a)
	}
	c2 := raise(20*time.Second, ms+5000)
	if c2.Floor <= a.Floor || c2.Fresh <= a.Fresh {
		t.Fatalf("a higher raise did not move the floor: %+v after %+v", c2, a)
	}
	// An older library's first-writer floor.
	if err := c.HSet(ctx, key, f, formatInt(ms+3_600_000)+":"+formatInt(ms-5000)).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := Record(ctx, n, key, "{p}:epoch", Guard{Mode: '0'}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Fields[f]; v.Floor != ms-5000 || v.Fresh != 0 {
		t.Fatalf("an older library's floor reads %+v", v)
	}
	d := raise(time.Second, 0)
	if d.Fresh != 0 {
		t.Fatalf("a raise without fresh gave a V: %+v", d)
	}
	// An expired floor starts over.
	if err := c.HSet(ctx, key, f, formatInt(ms-1)+":"+formatInt(ms+99_000_000)+":"+formatInt(ms+99_000_000)).Err(); err != nil {
		t.Fatal(err)
	}
	if e := raise(0, 0); e.Floor > ms+60_000 || e.Fresh != 0 {
		t.Fatalf("an expired floor was kept: %+v", e)
	}
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

// TestRecordPassesTheGuard: a record round counts toward a quorum, so it
// passes the restart guard (issue 44: every vote passes the guard). On a
// node whose epoch record was written by another process (a restart that
// kept the data), record.lua answers recovering, for about the max TTL,
// and writes nothing; with the guard off it records.
func TestRecordPassesTheGuard(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	n := nodeOf(c)
	const key, epoch = "{g}:configs", "{g}:epoch"
	if err := c.HSet(ctx, epoch, "run", "another process", "base", "1", "maxttl", "1000", "until", "1001", "kind", "new", "check", "1").Err(); err != nil {
		t.Fatal(err)
	}
	g := Guard{MaxTTL: 30 * time.Second, Delta: 50 * time.Millisecond, Mode: '1'}
	own := []RecordField{{Name: "c:A", TTL: time.Minute}}
	r, err := Record(ctx, n, key, epoch, g, own, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Recovering < 29*time.Second || r.Recovering > 30*time.Second || len(r.Fields) != 0 {
		t.Fatalf("a recovering node's record: %+v, want recovering for about 30s and no fields", r)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("a recovering node wrote its records (%d, %v)", n, err)
	}
	g.Mode = '0'
	if r, err := Record(ctx, n, key, epoch, g, own, nil); err != nil || r.Recovering != 0 || r.Fields["c:A"].Left <= 0 {
		t.Fatalf("the guard off: %+v, %v, want the record", r, err)
	}
}

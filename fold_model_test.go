package redlock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/model"
	"github.com/redlock-go/redlock/internal/script"
)

// TestFoldedRecordMatchesModel is the differential test of the first
// record folded into the first obtain's acquire (recorder.foldFirst; the
// model's foldRecords): the same records on two nodes, before a new
// Client's first obtain on them, end it the same way in the library, on
// real nodes, and in the model (model.PlayFirstObtain): granted or
// refused with ErrConfigConflict, whether the record first called for
// writes (and the acquire was made again), and a token at the move floor
// or above where a floor applies. Two nodes: both answer before a round
// is decided, in both. The fields name the Client's own set (own, by its
// identities), another set (x) and a third (y).
func TestFoldedRecordMatchesModel(t *testing.T) {
	type field struct {
		kind  byte // 'c', 's', 'j', 'm'
		a, b  string
		floor bool
	}
	scenarios := []struct {
		name   string
		fields []field
	}{
		{"no records", nil},
		{"a move from its set beside a live Client of the other alone", []field{{kind: 'j', a: "own", b: "x"}, {kind: 'c', a: "x"}}},
		{"a move from its set beside a relayed Client of the other alone", []field{{kind: 'j', a: "own", b: "x"}, {kind: 's', a: "x"}}},
		{"a move to its set, with a move floor", []field{{kind: 'j', a: "x", b: "own"}, {kind: 'm', a: "own", floor: true}}},
		{"a move floor and no move", []field{{kind: 'm', a: "own", floor: true}}},
		{"a live Client of another set alone, no move", []field{{kind: 'c', a: "x"}}},
		{"a move from its set, no other Client", []field{{kind: 'j', a: "own", b: "x"}}},
		{"a move between two other sets", []field{{kind: 'j', a: "y", b: "x"}, {kind: 'c', a: "x"}}},
	}
	cl := startNodes(t, 2)
	ctx := context.Background()
	for si, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			floorOf := func(f []field) bool { return slices.ContainsFunc(f, func(f field) bool { return f.floor }) }

			// The library.
			prefix := "fmodel" + strconv.Itoa(si) + ":"
			own := identifiedSet(t, cl.clients, prefix)
			exp := latestNodeTime(t, cl.clients) + time.Hour.Milliseconds()
			floor := exp
			names := map[string]string{"own": own, "x": "x", "y": "y"}
			for _, n := range cl.clients {
				for _, f := range sc.fields {
					name, v := libField(f.kind, names[f.a], names[f.b]), strconv.FormatInt(exp, 10)
					if f.kind == 'm' {
						v += ":" + strconv.FormatInt(floor, 10) + ":" + strconv.FormatInt(exp, 10)
					}
					if err := n.HSet(ctx, keys.Layout{Prefix: prefix}.Configs(), name, v).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			hook, attempts := attemptErrs()
			c := newClient(t, cl.clients, append(seamOpts(prefix), WithHook(hook))...)
			l, err := c.TryObtain(ctx, "job", 2*time.Second)
			lib := model.FirstObtain{Granted: err == nil, Conflict: errors.Is(err, ErrConfigConflict)}
			if err == nil {
				lib.Token = l.Token()
				_ = l.Release(ctx)
			} else if !lib.Conflict {
				t.Fatalf("library: %v", err)
			}
			a := attempts()
			lib.RecordFirst = len(a) > 0 && errors.Is(a[0], errRecordFirst)

			// The model: the same fields on its two nodes, whose
			// identities are 1 and 2.
			m := model.New(model.Config{Nodes: 2, TTL: 8, MaxTTL: 8, NodeTimeout: 2, Delta: 1, FenceTTL: 80, Horizon: 64, Second: 1,
				NodeSets: model.NodeSets{SetA: 0b11},
				Clients:  []model.ClientSpec{{Conf: model.ConfA, Kind: model.Plain, Mode: '0', Acquires: 1, Release: true}}})
			s := m.Init()
			const mExp, mFloor = 1000, 500
			mNames := map[string]string{"own": "1.2", "x": "x", "y": "y"}
			for ni := range s.Nodes {
				s.Nodes[ni].Data.ID = ni + 1
				var conf model.ConfFields
				for _, f := range sc.fields {
					cf := model.ConfField{Name: libField(f.kind, mNames[f.a], mNames[f.b]), Exp: mExp}
					if f.kind == 'm' {
						cf.M, cf.V = mFloor, mExp
					}
					conf = append(conf, cf)
				}
				slices.SortFunc(conf, func(a, b model.ConfField) int { return cmp.Compare(a.Name, b.Name) })
				s.Nodes[ni].Data.Conf = &conf
			}
			s.NextID = 3
			mod, err := m.PlayFirstObtain(s, 0)
			if err != nil {
				t.Fatal(err)
			}

			if lib.Granted != mod.Granted || lib.Conflict != mod.Conflict || lib.RecordFirst != mod.RecordFirst {
				t.Fatalf("library %+v, model %+v", lib, mod)
			}
			if floorOf(sc.fields) {
				if lib.Granted && lib.Token < floor*script.TokenSeed {
					t.Errorf("library: token %d below the floor %d", lib.Token, floor*script.TokenSeed)
				}
				if mod.Granted && mod.Token < mFloor*model.TokenSeed {
					t.Errorf("model: token %d below the floor %d", mod.Token, mFloor*model.TokenSeed)
				}
			}
			t.Logf("library %+v, model %+v", lib, mod)
		})
	}
}

// libField is a record field's name (internal/keys).
func libField(kind byte, a, b string) string {
	switch kind {
	case 'c':
		return keys.ConfigSingle(a)
	case 's':
		return keys.ConfigSeen(a)
	case 'j':
		return keys.ConfigJoint(a, b)
	}
	return keys.ConfigFloor(a)
}

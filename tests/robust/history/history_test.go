package history

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// rmw is one client's read-modify-write under a lock with token, sending
// storeToken to the store: a read at t answering read, a write at t+10.
func rmw(client string, token, storeToken, t, read int64, readRes, writeRes string) []Event {
	return []Event{
		{Type: TypeHold, Client: client, HoldFields: HoldFields{Kind: "plain", Token: token, Obtained: t - 1, End: t + 12}},
		store(client, t, t+1, StoreFields{Op: OpRead, StoreToken: storeToken, LockToken: token, Value: read, Result: readRes}),
		store(client, t+10, t+11, StoreFields{Op: OpWrite, StoreToken: storeToken, LockToken: token, Value: read + 1, Prev: read, Result: writeRes}),
	}
}

// store is client's operation on the store, called at inv, answered at resp.
func store(client string, inv, resp int64, op StoreFields) Event {
	return Event{Type: TypeStore, Client: client, CallFields: CallFields{Inv: inv, Resp: resp}, StoreFields: op}
}

func final(v, acc, rej int64) Event {
	return Event{Type: TypeFinal, FinalFields: FinalFields{Final: v, Accepted: acc, Rejected: rej}}
}

func TestCheck(t *testing.T) {
	var seq []Event
	seq = append(seq, rmw("a", 10, 10, 100, 0, OK, OK)...)
	seq = append(seq, rmw("b", 11, 11, 200, 1, OK, OK)...)
	// Two holders at once: b2 (token 13) reads after a2 (12) and the
	// store refuses a2's write.
	fenced := append([]Event{}, seq...)
	fenced = append(fenced, rmw("a", 12, 12, 300, 2, OK, Stale)...)
	fenced = append(fenced, rmw("b", 13, 13, 302, 2, OK, OK)...)
	fenced = append(fenced, final(3, 3, 1))
	// The same without fencing: both writes accepted, one update lost.
	unfenced := append([]Event{}, seq...)
	unfenced = append(unfenced, rmw("a", 12, 1, 300, 2, OK, OK)...)
	unfenced = append(unfenced, rmw("b", 13, 1, 302, 2, OK, OK)...)
	unfenced = append(unfenced, final(3, 4, 0))
	// A write without a reply that took effect, then one that did not.
	unknown := append([]Event{}, seq...)
	unknown = append(unknown, rmw("a", 12, 12, 300, 2, OK, Unknown)...)
	unknown = append(unknown, rmw("b", 13, 13, 400, 3, OK, OK)...)
	unknown = append(unknown, rmw("a", 14, 14, 500, 4, OK, Unknown)...)
	unknown = append(unknown, final(4, 4, 0))
	// A read that answered a value nobody wrote.
	phantom := append([]Event{}, seq...)
	phantom = append(phantom, rmw("a", 12, 12, 300, 7, OK, OK)...)
	phantom = append(phantom, final(8, 3, 0))
	// A later holder with a lower token, and a stale write accepted.
	inverted := append([]Event{}, seq...)
	inverted = append(inverted, rmw("a", 9, 9, 300, 2, OK, OK)...)
	inverted = append(inverted, final(3, 3, 0))

	for _, tc := range []struct {
		name                        string
		events                      []Event
		overlaps, inversions, stale int
		lost                        int64
		lin                         porcupine.CheckResult
	}{
		{"sequential", append(append([]Event{}, seq...), final(2, 2, 0)), 0, 0, 0, 0, porcupine.Ok},
		{"fenced-overlap", fenced, 1, 0, 0, 0, porcupine.Ok},
		{"unfenced-overlap", unfenced, 1, 0, 0, 1, porcupine.Illegal},
		{"unknown-writes", unknown, 0, 0, 0, 0, porcupine.Ok},
		{"phantom-read", phantom, 0, 0, 0, -5, porcupine.Illegal},
		{"token-inversion", inverted, 0, 2, 1, 0, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			html := filepath.Join(t.TempDir(), "v.html")
			r, err := Check(tc.events, 0, html)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r.Row())
			if r.Overlaps != tc.overlaps || r.Inversions != tc.inversions || r.StaleAccepted != tc.stale || r.Lost != tc.lost || r.Linearizable != tc.lin {
				t.Errorf("got %d overlaps, %d inversions, %d stale accepted, %d lost, %s; want %d, %d, %d, %d, %s",
					r.Overlaps, r.Inversions, r.StaleAccepted, r.Lost, r.Linearizable, tc.overlaps, tc.inversions, tc.stale, tc.lost, tc.lin)
			}
			_, err = os.Stat(html)
			if (err == nil) != (tc.lin == porcupine.Illegal) {
				t.Errorf("visualization written: %v, want %v", err == nil, tc.lin == porcupine.Illegal)
			}
		})
	}
}

func TestReentrantSameToken(t *testing.T) {
	hold := func(c string, tok, from, to int64) Event {
		return Event{Type: TypeHold, Client: c, HoldFields: HoldFields{Kind: "reentrant", Token: tok, Obtained: from, End: to}}
	}
	// One owner's holds with one token: one hold on the nodes.
	if _, inv := Conflicts([]Event{hold("a", 5, 1, 2), hold("a", 5, 3, 4), hold("a", 5, 5, 6)}); inv != 0 {
		t.Errorf("one owner's holds with one token: %d inversions", inv)
	}
	// Another owner's later hold with that token is an inversion.
	if _, inv := Conflicts([]Event{hold("a", 5, 1, 2), hold("b", 5, 3, 4)}); inv != 1 {
		t.Errorf("two owners, one token: %d inversions, want 1", inv)
	}
}

func TestSharedReads(t *testing.T) {
	ev := []Event{
		{Type: TypeHold, Client: "r1", HoldFields: HoldFields{Kind: "read", Token: 5, Obtained: 1, End: 50}},
		{Type: TypeHold, Client: "r2", HoldFields: HoldFields{Kind: "read", Token: 6, Obtained: 2, End: 50}},
		store("r2", 10, 11, StoreFields{Op: OpShared, StoreToken: 6, Result: OK}),
		store("r1", 12, 13, StoreFields{Op: OpShared, StoreToken: 5, Result: OK}),
		// A writer older than the newest reader is refused.
		store("w", 20, 21, StoreFields{Op: OpWrite, StoreToken: 4, Prev: 0, Value: 1, Result: Stale}),
		final(0, 0, 1),
	}
	r, err := Check(ev, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Overlaps != 0 || r.Linearizable != porcupine.Ok {
		t.Errorf("readers: %s", r.Row())
	}
	// A reader accepted after a newer writer's read is not linearizable.
	ev = append(ev, store("w2", 30, 31, StoreFields{Op: OpRead, StoreToken: 9, Result: OK}),
		store("r1", 40, 41, StoreFields{Op: OpShared, StoreToken: 5, Result: OK}))
	if r, _ := Check(ev, 0, ""); r.Linearizable != porcupine.Illegal {
		t.Errorf("a stale reader accepted: %s", r.Linearizable)
	}
}

func TestWriteRead(t *testing.T) {
	ev := append(rmw("a", 3, 3, 10, 0, OK, OK), Event{Type: TypeRun, RunFields: RunFields{Scenario: "s", Seed: 42}}, final(1, 1, 0),
		Event{Type: TypeFault, FaultFields: FaultFields{Fault: "partition", Target: "c0|n0", Start: 5, Stop: 9}})
	var buf bytes.Buffer
	if err := Write(&buf, ev); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], `"type":"run"`) || !strings.Contains(lines[len(lines)-1], `"type":"final"`) {
		t.Errorf("header or final state out of place:\n%s", buf.String())
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(back, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Scenario != "s" || r.Seed != 42 || r.Faults != 1 || r.Accepted != 1 || r.Linearizable != porcupine.Ok {
		t.Errorf("read back: %s", r.Row())
	}
}

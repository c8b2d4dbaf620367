package history

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// fullEvent sets every field of an Event, each to a value of its own.
var fullEvent = Event{
	Type:   TypeStore,
	Client: "c1",
	RunFields: RunFields{
		Scenario: "partition",
		Seed:     42,
		Config:   json.RawMessage(`{"nodes":5}`),
	},
	CallFields: CallFields{Inv: 1, Resp: 2, OK: true, Err: "e"},
	HoldFields: HoldFields{Kind: "plain", Token: 3, Obtained: 4, End: 5, Lost: true},
	StoreFields: StoreFields{
		Op:         OpWrite,
		StoreToken: 6,
		LockToken:  7,
		Value:      8,
		Prev:       9,
		Result:     Stale,
	},
	FaultFields: FaultFields{Fault: "f", Target: "c0|n0", Start: 10, Stop: 11, Count: 12},
	FinalFields: FinalFields{Final: 13, Accepted: 14, Rejected: 15},
	Text:        "t",
}

// fullEventJSON is fullEvent as the flat Event of 29 fields encoded it,
// before its fields were grouped in embedded structs: the history files
// keep that encoding, byte for byte.
const fullEventJSON = `{"type":"store","client":"c1","scenario":"partition","seed":42,"config":{"nodes":5},` +
	`"inv":1,"resp":2,"ok":true,"err":"e",` +
	`"kind":"plain","token":3,"obtained":4,"end":5,"lost":true,` +
	`"op":"write","store_token":6,"lock_token":7,"value":8,"prev":9,"result":"stale",` +
	`"fault":"f","target":"c0|n0","start":10,"stop":11,"count":12,` +
	`"final":13,"accepted":14,"rejected":15,` +
	`"text":"t"}`

func TestEventJSON(t *testing.T) {
	// Every field is set, so the golden line covers them all (a field
	// added later and left out of fullEvent fails here).
	n := 0
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Event]()) {
		if f.Anonymous {
			continue
		}
		n++
		if reflect.ValueOf(fullEvent).FieldByIndex(f.Index).IsZero() {
			t.Errorf("fullEvent leaves %s unset", f.Name)
		}
	}
	if n != 29 {
		t.Errorf("Event has %d fields, the golden line 29", n)
	}

	b, err := json.Marshal(fullEvent)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != fullEventJSON {
		t.Errorf("encoded:\n%s\nwant:\n%s", b, fullEventJSON)
	}
	var back Event
	if err := json.Unmarshal([]byte(fullEventJSON), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, fullEvent) {
		t.Errorf("decoded:\n%+v\nwant:\n%+v", back, fullEvent)
	}

	// The groups' zero values are left out, as the flat fields' were.
	if b, _ := json.Marshal(Event{}); string(b) != `{"type":""}` {
		t.Errorf("zero Event encoded as %s", b)
	}
}

// TestWriteReadLines holds Write to the lines the flat Event wrote for a
// few events of each kind, a fault that borrows the store's Value and Prev
// (a clock jump) among them, and Read to the events written.
func TestWriteReadLines(t *testing.T) {
	events := []Event{
		{Type: TypeRun, RunFields: RunFields{Scenario: "s", Seed: 7}},
		{Type: TypeFault, Client: "a", Text: "realtime -2ns",
			FaultFields: FaultFields{Fault: "clock jump", Target: "realtime", Start: 5, Stop: 5, Count: 1},
			StoreFields: StoreFields{Value: -3, Prev: -2}},
		{Type: TypeAttempt, Client: "a", CallFields: CallFields{Inv: 90, Resp: 99, OK: true}},
		{Type: TypeHold, Client: "a", HoldFields: HoldFields{Kind: "plain", Token: 10, Obtained: 99, End: 112, Lost: true}},
		{Type: TypeStore, Client: "a",
			CallFields:  CallFields{Inv: 100, Resp: 101},
			StoreFields: StoreFields{Op: OpRead, StoreToken: 10, LockToken: 10, Result: OK}},
		{Type: TypeFinal, FinalFields: FinalFields{Final: 1, Accepted: 1}},
	}
	const want = `{"type":"run","scenario":"s","seed":7}
{"type":"fault","client":"a","value":-3,"prev":-2,"fault":"clock jump","target":"realtime","start":5,"stop":5,"count":1,"text":"realtime -2ns"}
{"type":"attempt","client":"a","inv":90,"resp":99,"ok":true}
{"type":"hold","client":"a","kind":"plain","token":10,"obtained":99,"end":112,"lost":true}
{"type":"store","client":"a","inv":100,"resp":101,"op":"read","store_token":10,"lock_token":10,"result":"ok"}
{"type":"final","final":1,"accepted":1}
`
	var buf bytes.Buffer
	if err := Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	if buf.String() != want {
		t.Errorf("written:\n%s\nwant:\n%s", buf.String(), want)
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, events) {
		t.Errorf("read back:\n%+v\nwant:\n%+v", back, events)
	}
}

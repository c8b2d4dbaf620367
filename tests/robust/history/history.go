// Package history is the robustness suite's record of a run: every lock
// attempt and hold of every client, every operation on the fenced store with
// its invocation and response times and the store's decision, every fault,
// and the store's final state. A history is saved as JSON lines (one event
// a line, after a header line), which a person can read and Check (or the
// robustcheck command) can check again, offline:
//
//   - overlapping holds of the lock (two holders at once, unless both read);
//   - token inversions: a hold that ended before another began with a token
//     not below the later one's;
//   - stale writes accepted: an accepted write whose lock token is below
//     that of a write accepted before it began;
//   - lost updates: writes the store accepted beyond its final counter;
//   - linearizability of the store as the lock's users see it (porcupine,
//     model.go): a register guarded by tokens, where a write is an increment
//     of the value its writer read under the lock.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// Event types.
const (
	TypeRun     = "run"     // the header: what ran, with which seed
	TypeAttempt = "attempt" // one call of Obtain
	TypeHold    = "hold"    // one lock held, from Obtain's return to its end
	TypeStore   = "store"   // one operation on the fenced store
	TypeFault   = "fault"   // one fault injected
	TypeFinal   = "final"   // the store's final state, read after the run
	TypeNote    = "note"    // anything else worth reading
)

// Store operations.
const (
	OpRead   = "read"   // ReadFenced: a read for a read-modify-write
	OpShared = "shared" // ReadShared: a reader's read
	OpWrite  = "write"  // Write of Prev+1
)

// Store results.
const (
	OK      = "ok"      // accepted
	Stale   = "stale"   // refused: a higher token was seen
	Unknown = "unknown" // no reply (timeout, lost connection): may or may not have happened
)

// Event is one line of a history. Times are Unix nanoseconds of the wall
// clock, shared by every process of the machine (a process's own clock
// offsets, if any, are undone by its recorder).
//
// Its fields are grouped by the event types that use them, in embedded
// structs: encoding/json promotes an embedded struct's fields, so a line is
// one flat JSON object, the same as if the fields were Event's own, and
// e.Token reads a HoldFields field. A composite literal names the groups:
//
//	Event{Type: TypeHold, Client: "c0", HoldFields: HoldFields{Kind: "plain", Token: 7}}
//
// A few events borrow another type's fields: a note of a client's clocks
// sets Inv and Value, a clock jump (a fault) sets Value and Prev.
type Event struct {
	Type   string `json:"type"`
	Client string `json:"client,omitempty"`

	RunFields
	CallFields
	HoldFields
	StoreFields
	FaultFields
	FinalFields

	// TypeNote, or a comment on any event.
	Text string `json:"text,omitempty"`
}

// RunFields are the fields of TypeRun.
type RunFields struct {
	Scenario string          `json:"scenario,omitempty"`
	Seed     int64           `json:"seed,omitempty"`
	Config   json.RawMessage `json:"config,omitempty"`
}

// CallFields are a call's fields: for TypeAttempt and TypeStore, its
// invocation and response; for TypeAttempt, whether the lock was obtained,
// and the error.
type CallFields struct {
	Inv  int64  `json:"inv,omitempty"`
	Resp int64  `json:"resp,omitempty"`
	OK   bool   `json:"ok,omitempty"`
	Err  string `json:"err,omitempty"`
}

// HoldFields are the fields of TypeHold: the lock's kind, token, when
// Obtain returned it and when the hold ended: min(Release called, the
// validity's end in real time). Lost when the client found it lost before
// its write.
type HoldFields struct {
	Kind     string `json:"kind,omitempty"`
	Token    int64  `json:"token,omitempty"`
	Obtained int64  `json:"obtained,omitempty"`
	End      int64  `json:"end,omitempty"`
	Lost     bool   `json:"lost,omitempty"`
}

// StoreFields are the fields of TypeStore: the operation, the token it
// carried (a control without fencing sends a constant), the lock's token,
// the value read or written, for a write the value its writer had read,
// and the store's decision.
type StoreFields struct {
	Op         string `json:"op,omitempty"`
	StoreToken int64  `json:"store_token,omitempty"`
	LockToken  int64  `json:"lock_token,omitempty"`
	Value      int64  `json:"value,omitempty"`
	Prev       int64  `json:"prev,omitempty"`
	Result     string `json:"result,omitempty"`
}

// FaultFields are the fields of TypeFault: what, on what, from Start to
// Stop; for a failpoint, how many times it fired.
type FaultFields struct {
	Fault  string `json:"fault,omitempty"`
	Target string `json:"target,omitempty"`
	Start  int64  `json:"start,omitempty"`
	Stop   int64  `json:"stop,omitempty"`
	Count  int64  `json:"count,omitempty"`
}

// FinalFields are the fields of TypeFinal: the store's counter, and its own
// counts of accepted writes and refused operations.
type FinalFields struct {
	Final    int64 `json:"final,omitempty"`
	Accepted int64 `json:"accepted,omitempty"`
	Rejected int64 `json:"rejected,omitempty"`
}

// Recorder collects events from any goroutine.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Add records e.
func (r *Recorder) Add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Write writes events as JSON lines, the header first and the rest in the
// order of their first time.
func Write(w io.Writer, events []Event) error {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b Event) int {
		return cmpTime(a, b)
	})
	bw := bufio.NewWriter(w)
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// at is an event's first time, for sorting: the header first, the final
// state last.
func at(e Event) int64 {
	switch e.Type {
	case TypeRun:
		return -1
	case TypeFinal:
		return 1<<63 - 1
	case TypeHold:
		return e.Obtained
	case TypeFault:
		return e.Start
	}
	return e.Inv
}

func cmpTime(a, b Event) int {
	x, y := at(a), at(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Save writes events to path.
func Save(path string, events []Event) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, events); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Read reads a history written by Write.
func Read(r io.Reader) ([]Event, error) {
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", n, err)
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

// Load reads the history file at path.
func Load(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

package script

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/reply"
)

//go:embed record.lua
var recordSrc string

var record = newScript(epochSrc + "\n" + recordSrc)

// RecordField is one field of a configuration record and its TTL.
type RecordField struct {
	Name string
	TTL  time.Duration
}

// FloorRaise is a move floor to raise (record.lua): its M to at least the
// node's time plus Ahead, its V to at least Until (a node time, ms; 0:
// none), and its life to at least M + TTL.
type FloorRaise struct {
	Name  string
	Ahead time.Duration
	Until int64
	TTL   time.Duration
}

// RecordValue is a live field of a configuration record, as record.lua
// returns it: how long it has left on the node, and for a move floor its
// M and V (node times, ms; V is 0 when no raise gave one).
type RecordValue struct {
	Left  time.Duration
	Floor int64
	Fresh int64
}

// Records are a node's live configuration records after a record call:
// the node's time (ms) and each live field; or, on a node that may not
// take part yet (the restart guard), how long it still recovers, and
// nothing else.
type Records struct {
	Now        int64
	Fields     map[string]RecordValue
	Recovering time.Duration
}

// Record runs record.lua on one node (docs/reconfiguration.md), under the
// restart guard g with the node's epoch record at epochKey: it keeps the
// fields of keep alive for their TTL, raises each move floor of floors,
// and returns the node's live fields. A recovering node changes nothing
// and returns Records with Recovering set.
func Record(ctx context.Context, n driver.Node, key, epochKey string, g Guard, keep []RecordField, floors []FloorRaise) (Records, error) {
	v, err := record.call([]string{key, epochKey}, recordArgv(g, keep, floors)...).Run(ctx, n)
	if err != nil {
		return Records{}, err
	}
	return decodeRecords(v)
}

// RecordCall is a record call (Record's) for the head of an acquire's
// pipeline (Call.AcquireRecorded): a function of the library (FCALL,
// library.go), loaded with the acquire's, or where the node cannot run
// functions EVAL of record.lua's source, which then cannot meet a
// NOSCRIPT after the acquire has run.
type RecordCall struct{ c fnCall }

// NewRecordCall prepares what Record would run, for AcquireRecorded.
func NewRecordCall(key, epochKey string, g Guard, keep []RecordField, floors []FloorRaise) RecordCall {
	fn := append([]any{recordFn[0], recordFn[1], "2", key, epochKey}, recordArgv(g, keep, floors)...)
	return RecordCall{fnCall{fn: fn, eval: withHead(fn, [2]any{"eval", record.src})}}
}

// recordArgv are record.lua's arguments.
func recordArgv(g Guard, keep []RecordField, floors []FloorRaise) []any {
	argv := make([]any, 0, 6+2*len(keep)+4*len(floors))
	argv = append(argv, g.args()...)
	argv = append(argv, strconv.Itoa(len(keep)))
	for _, f := range keep {
		argv = append(argv, f.Name, ms(max(f.TTL, time.Millisecond)))
	}
	for _, f := range floors {
		argv = append(argv, f.Name, ms(max(f.Ahead, 0)), ms(max(f.TTL, time.Millisecond)), strconv.FormatInt(max(f.Until, 0), 10))
	}
	return argv
}

func decodeRecords(v any) (Records, error) {
	s, err := reply.Slice(v, nil)
	if err != nil || len(s) == 0 {
		return Records{}, fmt.Errorf("record: unexpected reply %v", v)
	}
	now, err := reply.Int64(s[0], nil)
	if err != nil {
		return Records{}, fmt.Errorf("record: node time: %w", err)
	}
	if now == -1 && len(s) == 2 {
		ms, err := reply.Int64(s[1], nil)
		if err != nil {
			return Records{}, fmt.Errorf("record: unexpected reply %v", v)
		}
		return Records{Recovering: time.Duration(ms) * time.Millisecond}, nil
	}
	if len(s)%2 != 1 {
		return Records{}, fmt.Errorf("record: unexpected reply %v", v)
	}
	r := Records{Now: now, Fields: make(map[string]RecordValue, len(s)/2)}
	for i := 1; i+1 < len(s); i += 2 {
		f, err1 := reply.String(s[i], nil)
		val, err2 := reply.String(s[i+1], nil)
		if err1 != nil || err2 != nil {
			return Records{}, fmt.Errorf("record: field %d: unexpected reply %v %v", i/2, s[i], s[i+1])
		}
		parts := strings.Split(val, ":")
		e, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil || len(parts) > 3 {
			return Records{}, fmt.Errorf("record: field %s: value %q", f, val)
		}
		rv := RecordValue{Left: time.Duration(e-now) * time.Millisecond}
		// A floor's M and V; an older library wrote M alone (first
		// writer wins), which reads as a floor never fresh.
		for j, p := range []*int64{&rv.Floor, &rv.Fresh} {
			if len(parts) > j+1 && parts[j+1] != "" {
				if *p, err = strconv.ParseInt(parts[j+1], 10, 64); err != nil {
					return Records{}, fmt.Errorf("record: field %s: value %q", f, val)
				}
			}
		}
		r.Fields[f] = rv
	}
	return r, nil
}

// TokenSeed is the factor of a node's time (ms) in a counter seeded from
// it (token.lua), and in a move floor.
const TokenSeed = 1024

// Seed is a missing fencing counter's first value at node time ms: the
// time rounded down to the second, x TokenSeed (token.lua's seed, and
// retire.lua's).
func Seed(ms int64) int64 { return (ms - ms%1000) * TokenSeed }

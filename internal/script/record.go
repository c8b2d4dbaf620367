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

var record = newScript(recordSrc)

// RecordField is one field of a configuration record and its TTL.
type RecordField struct {
	Name string
	TTL  time.Duration
}

// RecordValue is a live field of a configuration record, as record.lua
// returns it: how long it has left on the node, and for a first-writer
// field (a move floor) the node time it was first written (ms).
type RecordValue struct {
	Left  time.Duration
	First int64
}

// Records are a node's live configuration records after a record call:
// the node's time (ms) and each live field.
type Records struct {
	Now    int64
	Fields map[string]RecordValue
}

// Record runs record.lua on one node (docs/reconfiguration.md): it keeps
// the fields of keep alive for their TTL, writes each field of first that
// is missing or expired, and returns the node's live fields.
func Record(ctx context.Context, n driver.Node, key string, keep, first []RecordField) (Records, error) {
	argv := make([]any, 0, 1+2*(len(keep)+len(first)))
	argv = append(argv, strconv.Itoa(len(keep)))
	for _, f := range append(keep, first...) {
		argv = append(argv, f.Name, ms(max(f.TTL, time.Millisecond)))
	}
	v, err := record.call([]string{key}, argv...).Run(ctx, n)
	if err != nil {
		return Records{}, err
	}
	return decodeRecords(v)
}

func decodeRecords(v any) (Records, error) {
	s, err := reply.Slice(v, nil)
	if err != nil || len(s)%2 != 1 {
		return Records{}, fmt.Errorf("record: unexpected reply %v", v)
	}
	now, err := reply.Int64(s[0], nil)
	if err != nil {
		return Records{}, fmt.Errorf("record: node time: %w", err)
	}
	r := Records{Now: now, Fields: make(map[string]RecordValue, len(s)/2)}
	for i := 1; i+1 < len(s); i += 2 {
		f, err1 := reply.String(s[i], nil)
		val, err2 := reply.String(s[i+1], nil)
		if err1 != nil || err2 != nil {
			return Records{}, fmt.Errorf("record: field %d: unexpected reply %v %v", i/2, s[i], s[i+1])
		}
		exp, first, _ := strings.Cut(val, ":")
		e, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return Records{}, fmt.Errorf("record: field %s: expiry %q", f, exp)
		}
		rv := RecordValue{Left: time.Duration(e-now) * time.Millisecond}
		if first != "" {
			if rv.First, err = strconv.ParseInt(first, 10, 64); err != nil {
				return Records{}, fmt.Errorf("record: field %s: first write %q", f, first)
			}
		}
		r.Fields[f] = rv
	}
	return r, nil
}

// TokenSeed is the factor of a node's time (ms) in a counter seeded from
// it (token.lua), and in a move floor.
const TokenSeed = 1024

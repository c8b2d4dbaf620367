package history

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// state is the fenced store as its users see it: the counter and the
// highest tokens it has seen from exclusive holders (a fenced read or a
// write) and from readers (a shared read), as write.lua, read.lua and
// shared.lua keep them.
type state struct {
	value      int64
	wmax, rmax int64
}

// input is one store operation as it was called.
type input struct {
	op    string
	token int64 // the token sent to the store
	prev  int64 // a write's: the value its writer read under the lock
}

// output is the store's answer.
type output struct {
	result string
	value  int64 // a read's value
}

// peek is the checker's own read of the final counter, after the run.
const peek = "peek"

// The model's steps. A fenced read or a write is refused when its token is
// below the highest seen (both kinds); a shared read when it is below the
// highest exclusive one. What a user of the lock assumes is in the write:
// an accepted write of prev+1 requires the counter to still be prev, the
// value its writer read, because nobody else may have written while it held
// the lock. A lost update (two holders read the same value and both writes
// were accepted) has no linearization. An operation without a reply
// (Unknown) may or may not have taken effect: the model steps both ways.
func step(s state, in input, out output) []state {
	seen := max(s.wmax, s.rmax)
	switch in.op {
	case peek:
		if out.value == s.value {
			return []state{s}
		}
		return nil
	case OpRead:
		ok := in.token >= seen
		next := s
		next.wmax = in.token
		switch out.result {
		case OK:
			if ok && out.value == s.value {
				return []state{next}
			}
		case Stale:
			if !ok {
				return []state{s}
			}
		case Unknown:
			if ok {
				return []state{s, next}
			}
			return []state{s}
		}
		return nil
	case OpShared:
		ok := in.token >= s.wmax
		next := s
		next.rmax = max(s.rmax, in.token)
		switch out.result {
		case OK:
			if ok && out.value == s.value {
				return []state{next}
			}
		case Stale:
			if !ok {
				return []state{s}
			}
		case Unknown:
			if ok {
				return []state{s, next}
			}
			return []state{s}
		}
		return nil
	case OpWrite:
		ok := in.token >= seen
		next := state{value: in.prev + 1, wmax: in.token, rmax: s.rmax}
		switch out.result {
		case OK:
			if ok && s.value == in.prev {
				return []state{next}
			}
		case Stale:
			if !ok {
				return []state{s}
			}
		case Unknown:
			if ok && s.value == in.prev {
				return []state{s, next}
			}
			return []state{s}
		}
		return nil
	}
	return nil
}

// Model is the porcupine model of the fenced store: a register guarded by
// tokens, whose writes are increments of what their writer read.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(s, in, out any) []any {
			var next []any
			for _, n := range step(s.(state), in.(input), out.(output)) {
				next = append(next, n)
			}
			return next
		},
		Equal: func(a, b any) bool { return a.(state) == b.(state) },
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			switch i.op {
			case peek:
				return fmt.Sprintf("final read → %d", o.value)
			case OpWrite:
				return fmt.Sprintf("write(t=%d, %d→%d) → %s", i.token, i.prev, i.prev+1, o.result)
			}
			if o.result == OK {
				return fmt.Sprintf("%s(t=%d) → %d", i.op, i.token, o.value)
			}
			return fmt.Sprintf("%s(t=%d) → %s", i.op, i.token, o.result)
		},
		DescribeState: func(s any) string {
			st := s.(state)
			return fmt.Sprintf("value %d, token %d, reader token %d", st.value, st.wmax, st.rmax)
		},
	}
	return nm.ToModel()
}

// Operations turns a history's store operations into porcupine's, with a
// final read of the counter after the last response when the history has
// a final state. An operation without a reply is given the end of the run
// as its response: it took effect before the final read, or never.
func Operations(events []Event) []porcupine.Operation {
	clients := map[string]int{}
	id := func(c string) int {
		if n, ok := clients[c]; ok {
			return n
		}
		clients[c] = len(clients)
		return clients[c]
	}
	var end int64
	for _, e := range events {
		if e.Type == TypeStore {
			end = max(end, e.Resp, e.Inv)
		}
	}
	end++
	var ops []porcupine.Operation
	for _, e := range events {
		if e.Type != TypeStore {
			continue
		}
		ret := e.Resp
		if e.Result == Unknown {
			ret = end
		}
		ops = append(ops, porcupine.Operation{
			ClientId: id(e.Client),
			Input:    input{op: e.Op, token: e.StoreToken, prev: e.Prev},
			Call:     e.Inv,
			Output:   output{result: e.Result, value: e.Value},
			Return:   ret,
		})
	}
	for _, e := range events {
		if e.Type == TypeFinal {
			ops = append(ops, porcupine.Operation{
				ClientId: id("checker"),
				Input:    input{op: peek},
				Call:     end + 1,
				Output:   output{value: e.Final},
				Return:   end + 2,
			})
		}
	}
	return ops
}

// Linearizable checks the store operations of events against Model within
// timeout (0: none). On a violation it writes porcupine's visualization to html, when
// html is not empty.
func Linearizable(events []Event, timeout time.Duration, html string) (porcupine.CheckResult, error) {
	m := Model()
	ops := Operations(events)
	if len(ops) == 0 {
		return porcupine.Ok, nil
	}
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	if res == porcupine.Illegal && html != "" {
		if err := porcupine.VisualizePath(m, info, html); err != nil {
			return res, fmt.Errorf("write the visualization: %w", err)
		}
	}
	return res, nil
}

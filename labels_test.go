package redlock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"regexp"
	"strconv"
	"testing"
)

// TestLabelsAreStable: the labels are stable values that hooks, dashboards
// and alerts match (redlockprom, redlockotel). Each constant of labels.go
// is here with its value as written, so that renaming a value, or adding
// or removing a label, fails until the list says so; each is snake_case
// and unique among the values of its type.
func TestLabelsAreStable(t *testing.T) {
	labels := []struct{ typ, name, got, want string }{
		{"Result", "ResultObtained", string(ResultObtained), "obtained"},
		{"Result", "ResultHeld", string(ResultHeld), "held"},
		{"Result", "ResultNoQuorum", string(ResultNoQuorum), "no_quorum"},
		{"Result", "ResultBreakerOpen", string(ResultBreakerOpen), "breaker_open"},
		{"Result", "ResultCanceled", string(ResultCanceled), "canceled"},
		{"Result", "ResultClosed", string(ResultClosed), "closed"},
		{"Result", "ResultError", string(ResultError), "error"},
		{"Result", "ResultOK", string(ResultOK), "ok"},
		{"Result", "ResultNotHeld", string(ResultNotHeld), "not_held"},
		{"Result", "ResultFailed", string(ResultFailed), "failed"},
		{"Result", "ResultHandedOff", string(ResultHandedOff), "handed_off"},
		{"Reason", "ReasonHeld", string(ReasonHeld), "held"},
		{"Reason", "ReasonNotOwner", string(ReasonNotOwner), "not_owner"},
		{"Reason", "ReasonWrongKind", string(ReasonWrongKind), "wrong_kind"},
		{"Reason", "ReasonRecovering", string(ReasonRecovering), "recovering"},
		{"Reason", "ReasonNotReplicated", string(ReasonNotReplicated), "not_replicated"},
		{"Reason", "ReasonTimeout", string(ReasonTimeout), "timeout"},
		{"Reason", "ReasonPending", string(ReasonPending), "pending"},
		{"Reason", "ReasonSkipped", string(ReasonSkipped), "skipped"},
		{"Reason", "ReasonError", string(ReasonError), "error"},
		{"WokenBy", "WokenByRelease", string(WokenByRelease), "release"},
		{"WokenBy", "WokenByTimer", string(WokenByTimer), "timer"},
		{"WokenBy", "WokenByContext", string(WokenByContext), "context"},
		{"WokenBy", "WokenByTurn", string(WokenByTurn), "turn"},
		{"BreakerState", "BreakerClosed", string(BreakerClosed), "closed"},
		{"BreakerState", "BreakerOpen", string(BreakerOpen), "open"},
		{"BreakerState", "BreakerHalfOpen", string(BreakerHalfOpen), "half_open"},
	}
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	byName := map[string]string{}  // name: "type value"
	seen := map[[2]string]string{} // type and value: name
	for _, l := range labels {
		if l.got != l.want {
			t.Errorf("%s is %q, want %q", l.name, l.got, l.want)
		}
		if !snake.MatchString(l.got) {
			t.Errorf("%s: %q is not snake_case", l.name, l.got)
		}
		if other, dup := seen[[2]string{l.typ, l.got}]; dup {
			t.Errorf("%s and %s are both %q", l.name, other, l.got)
		}
		seen[[2]string{l.typ, l.got}] = l.name
		byName[l.name] = l.typ + " " + l.got
	}

	// Every constant of labels.go is in the list, with its type.
	f, err := parser.ParseFile(token.NewFileSet(), "labels.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					n++
					v, _ := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
					if got := types.ExprString(vs.Type) + " " + v; byName[id.Name] != got {
						t.Errorf("labels.go: %s, %s, is not in the list", id.Name, got)
					}
				}
			}
		}
	}
	if n != len(labels) {
		t.Errorf("labels.go has %d labels, the list %d", n, len(labels))
	}
}

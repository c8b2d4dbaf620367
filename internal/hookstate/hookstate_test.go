package hookstate

import "testing"

func TestHoldings(t *testing.T) {
	var h Holdings
	h.Obtained("a")
	h.Obtained("b")
	if !h.Lost("a") || h.Released("a") {
		t.Error("a lost lock's release ended its hold again")
	}
	if !h.Released("b") || h.Lost("b") {
		t.Error("a loss reported after the release ended the hold again")
	}
	if h.Released("c") {
		t.Error("the release of a lock never obtained ended a hold")
	}
	if len(h.held) != 0 || len(h.gone) != 0 {
		t.Errorf("left %v %v", h.held, h.gone)
	}
}

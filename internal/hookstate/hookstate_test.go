package hookstate

import "testing"

func TestHoldings(t *testing.T) {
	var h Holdings
	h.Obtained("a", 1)
	h.Obtained("b", 1)
	h.Obtained("a", 2) // another lock of the name (another Client)
	if !h.Ended("a", 1) || h.Ended("a", 1) {
		t.Error("a lock's second end (its release after its loss) was counted")
	}
	if !h.Ended("b", 1) || h.Ended("b", 1) {
		t.Error("a loss reported after the release ended the hold again")
	}
	if h.Ended("c", 1) {
		t.Error("the release of a lock never obtained ended a hold")
	}
	if !h.Ended("a", 2) {
		t.Error("the other lock of a name was no longer held")
	}
	if len(h.held) != 0 {
		t.Errorf("left %v", h.held)
	}
}

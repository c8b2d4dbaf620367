package nodelog

import (
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	var l Limiter
	now := time.Now()
	if !l.Due(0, Skipped, now) {
		t.Fatal("first line not due")
	}
	if l.Due(0, Skipped, now.Add(Every-time.Millisecond)) {
		t.Error("a second line within a minute")
	}
	if !l.Due(1, Skipped, now) || !l.Due(0, Recovering, now) {
		t.Error("another node or kind held back")
	}
	if !l.Due(0, Skipped, now.Add(Every)) {
		t.Error("no line after a minute")
	}
}

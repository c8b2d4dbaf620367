package driver

import (
	"testing"
	"time"
)

func TestArg(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{"{lock}", "{lock}"},
		{[]byte("value"), "value"},
		{3, "3"},
		{int64(1700000000000), "1700000000000"},
		{int64(-1), "-1"},
		{int32(7), "7"},
		{uint64(1 << 63), "9223372036854775808"},
		{1.5, "1.5"},
		{1e21, "1000000000000000000000"}, // plain decimal, as go-redis writes it
		{true, "1"},
		{false, "0"},
		{time.Second, "1s"}, // fmt.Sprint
	} {
		if got := Arg(c.v); got != c.want {
			t.Errorf("Arg(%T %v) = %q, want %q", c.v, c.v, got, c.want)
		}
	}
}

// The arguments of every script call, the key and a script's numkeys, cost
// the drivers that read them no allocation.
func TestArgOfAStringOrASmallIntAllocatesNothing(t *testing.T) {
	var s any = "{lock}"
	var n any = 3
	if a := testing.AllocsPerRun(100, func() { _, _ = Arg(s), Arg(n) }); a != 0 {
		t.Errorf("Arg of a string and a small int allocates %v times", a)
	}
}

package redlock

import (
	"errors"
	"testing"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
)

// TestJointOptionErrors: bad next sets are refused with ErrInvalid.
func TestJointOptionErrors(t *testing.T) {
	cl := startNodes(t, 3)
	n0 := goredis.New(cl.clients[0])
	for name, next := range map[string][]driver.Node{
		"empty":  {},
		"nil":    {nil},
		"twice":  {n0, goredis.New(cl.clients[0])},
		"twice2": {n0, n0},
	} {
		if _, err := New(cl.clients[:2], WithNextNodes(next...)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	c, err := New(cl.clients[:2], WithNextNodes(n0, goredis.New(cl.clients[2])))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.e.nodes) != 3 || c.e.sets.cur != 0b011 || c.e.sets.next != 0b101 {
		t.Fatalf("nodes %d, sets %b %b; want 3 nodes, 011 and 101", len(c.e.nodes), c.e.sets.cur, c.e.sets.next)
	}
	// A majority of two nodes is both: of {0,1} and of {0,2}.
	if r := c.e.majority; r.Met(0b011) || r.Met(0b101) || r.Met(0b110) || !r.Met(0b111) {
		t.Errorf("joint majority rule %v decides wrongly", r)
	}
}

package script

import (
	"context"
	"testing"
	"time"

	layout "github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Every re-seed is a vote, and passes the restart guard (issue 44): on a
// node that recovers (started just now), a refresh that finds its hold
// missing from a hash that still exists answers NotReseeded and adds
// nothing, for a write hold beside another hold of its owner, a read hold
// beside another reader's and a permit beside another permit. The refresh
// of a hold the node still has extends it: refusing it would drop every
// held lock in a rolling restart.
func TestReseedOfAHoldIsGuarded(t *testing.T) {
	c := redistest.Start(t, 1)[0].Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	recovering := on
	recovering.MaxTTL = 30 * time.Second // the node recovers for the whole test
	rows := []struct {
		label      string
		kept, lost Hold
	}{
		{"write", Hold{Mode: 'w', Owner: "job", ID: "w1"}, Hold{Mode: 'w', Owner: "job", ID: "w2"}},
		{"read", Hold{Mode: 'r', ID: "r1"}, Hold{Mode: 'r', ID: "r2"}},
		{"permit", Hold{Mode: 's', Permits: 2, ID: "p1"}, Hold{Mode: 's', Permits: 2, ID: "p2"}},
	}
	for _, row := range rows {
		t.Run(row.label, func(t *testing.T) {
			k := keys("guarded-" + row.label)
			refresh := FamilyRefresh
			if row.kept.Mode == 's' {
				refresh = PermitRefresh
			}
			for _, h := range []Hold{row.kept, row.lost} {
				call := FamilyAcquireCall(k, h, time.Minute, off)
				if h.Mode == 's' {
					call = PermitAcquireCall(k, h, time.Minute, off)
				}
				if a, err := call.Acquire(ctx, nodeOf(c), Ack{}); err != nil || !a.OK() {
					t.Fatalf("taking hold %s: %+v, %v", h.ID, a, err)
				}
			}
			if err := c.HDel(ctx, k.Lock, layout.Hold(row.lost.ID)).Err(); err != nil {
				t.Fatal(err)
			}
			r, err := refresh(k, &row.lost, time.Minute).Run(ctx, nodeOf(c), recovering)
			if err != nil || r != NotReseeded {
				t.Fatalf("refresh of a hold missing from the hash, on a recovering node: %v, %v; want NotReseeded", r, err)
			}
			if n, err := c.HExists(ctx, k.Lock, layout.Hold(row.lost.ID)).Result(); err != nil || n {
				t.Fatalf("the recovering node took the hold back: %v, %v", n, err)
			}
			if r, err := refresh(k, &row.kept, time.Minute).Run(ctx, nodeOf(c), recovering); err != nil || r != Extended {
				t.Fatalf("refresh of a hold the recovering node has: %v, %v; want Extended", r, err)
			}
			if a, err := Acquire(ctx, nodeOf(c), keys("probe"), "x", time.Second, recovering, Ack{}); err != nil || a.Status != Recovering {
				t.Fatalf("the node is not recovering: %+v, %v", a, err)
			}
		})
	}
}

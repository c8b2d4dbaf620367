package redlock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/model"
	"github.com/redlock-go/redlock/internal/script"
)

// TestReadIdentityMatchesModel plays the same acquire replies through the
// library's reading of the identities they carry (identities.learnRead,
// issue 50's fold: a Client without configuration records reads each
// node's identity with its first acquire there) and the model's
// (Model.ReadIdentity): random node sets of three to five addresses, some
// leading to one server, and replies in random order, late and repeated
// ones included. After each reply both must agree on whether its vote
// counts and whether the node set is refused.
func TestReadIdentityMatchesModel(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 50))
		n := 3 + r.IntN(3)
		// server[i] is the server node i's address leads to.
		server := make([]int, n)
		for i := range server {
			server[i] = i
			if r.IntN(4) == 0 {
				server[i] = r.IntN(n)
			}
		}
		// The library: a Client that does no I/O here (New does none, and
		// its fold makes no first contact).
		nodes := make([]redis.UniversalClient, n)
		for i := range nodes {
			nodes[i] = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(1+i)})
			defer nodes[i].Close()
		}
		c := newClient(t, nodes)
		ident := &c.e.ident
		if !ident.fold {
			t.Fatal("a Client without records on standalone nodes does not fold")
		}
		if err := ident.check(ctx, time.Second, true); err != nil {
			t.Fatal(err)
		}
		// The model: one client without records, on n nodes whose
		// identities are 1..n.
		m := model.New(model.Config{Nodes: n, TTL: 8, MaxTTL: 8, NodeTimeout: 2, Delta: 1, FenceTTL: 80, Horizon: 64, Second: 1,
			Clients: []model.ClientSpec{{Kind: model.Plain, Mode: '0', Acquires: 1}}})
		s := m.Init()

		for step := range 3 * n {
			i := r.IntN(n)
			id := server[i] + 1
			libErr := ident.learnRead(i, script.Identity{ID: strconv.Itoa(id), RunID: "run" + strconv.Itoa(id)}, nil)
			counts := m.ReadIdentity(s, 0, i, id)
			if (libErr == nil) != counts || (ident.result() != nil) != s.Clients[0].Invalid {
				t.Fatalf("seed %d, step %d: node %d (server %d of %v): the library's vote counts %v (%v), the model's %v (refused %v)",
					seed, step, i, server[i], server, libErr == nil, libErr, counts, s.Clients[0].Invalid)
			}
		}
	}
}

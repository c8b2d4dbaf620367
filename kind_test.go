package redlock

import (
	"testing"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Redis-free tests of the kinds' token and vote rules (kind.go): the
// replies are written by hand, as a round on the nodes would return them.

// vote is a yes-vote of a node that issued token (plain lock, permit, or
// a fresh vote of the family, whose Counter is the token it issued).
func vote(token int64) quorum.Reply[script.Acquired] {
	return quorum.Reply[script.Acquired]{Yes: true, Val: script.Acquired{Status: script.Taken, Token: token, Counter: token}}
}

// found is a yes-vote of the family that found the owner's lock with
// recorded token t, on a node whose fencing counter is counter.
func found(t, counter int64) quorum.Reply[script.Acquired] {
	return quorum.Reply[script.Acquired]{Yes: true, Val: script.Acquired{Status: script.Taken, Token: t, Counter: counter, Existed: true}}
}

// no is a node that refused, whatever its reply's values.
func no(token int64) quorum.Reply[script.Acquired] {
	return quorum.Reply[script.Acquired]{Val: script.Acquired{Status: script.Held, Token: token, Counter: token}}
}

type replies = []quorum.Reply[script.Acquired]

// TestTokenHighest is the token rule of the plain lock and the permit: the
// highest counter among the yes-votes; a second round raises the others
// unless a quorum of the nodes issued it (docs/fencing.md).
func TestTokenHighest(t *testing.T) {
	for _, c := range []struct {
		name  string
		q     quorum.Rule
		r     replies
		token int64
		raise bool
	}{
		{"all equal", quorum.Count(2), replies{vote(7), vote(7), vote(7)}, 7, false},
		{"a quorum issued the highest", quorum.Count(2), replies{vote(7), vote(5), vote(7)}, 7, false},
		{"the highest is one node's", quorum.Count(2), replies{vote(7), vote(5), vote(5)}, 7, true},
		{"a refusal's higher counter does not count", quorum.Count(2), replies{vote(5), no(9), vote(5)}, 5, false},
		{"a refusal is not one of the quorum", quorum.Count(3), replies{vote(5), no(5), vote(5), vote(4), no(0)}, 5, true},
		{"two of five are no quorum", quorum.Count(3), replies{vote(8), vote(8), vote(3), no(0), vote(3)}, 8, true},
		{"joint: a quorum of each set", quorum.Joint(0b0111, 2, 0b1110, 2), replies{vote(4), vote(4), vote(4), vote(1)}, 4, false},
		{"joint: a quorum of one set only", quorum.Joint(0b0011, 2, 0b1100, 2), replies{vote(4), vote(4), vote(1), vote(1)}, 4, true},
	} {
		for _, k := range []struct {
			name string
			kind kind
		}{{"plain", plainKind}, {"permit", permitKind}} {
			token, raise := k.kind.token(c.r, c.q)
			if token != c.token || raise != c.raise {
				t.Errorf("%s, %s: token %d, raise %v; want %d, %v", k.name, c.name, token, raise, c.token, c.raise)
			}
		}
	}
}

// TestTokenFamily is the family's token rule (docs/lock-family.md,
// "Fencing tokens"): rule 1 continues the tenure when a quorum of the
// yes-votes found the owner's lock with one recorded token; otherwise rule
// 2 takes the largest of the fresh votes' counters and of one more than
// the counter of each vote that found the lock, and raises it unless no
// vote found the lock and a quorum issued it.
func TestTokenFamily(t *testing.T) {
	for _, c := range []struct {
		name  string
		q     quorum.Rule
		r     replies
		token int64
		raise bool
	}{
		{"rule 1: a quorum found token 4", quorum.Count(2), replies{found(4, 9), found(4, 6), vote(12)}, 4, false},
		{"rule 1: every node found it", quorum.Count(2), replies{found(4, 9), found(4, 6), found(4, 4)}, 4, false},
		{"rule 1 ignores a refusal", quorum.Count(2), replies{found(4, 9), no(0), found(4, 6)}, 4, false},
		{"rule 2: the votes that found it disagree", quorum.Count(2), replies{found(4, 9), found(3, 6), vote(5)}, 10, true},
		{"rule 2: one found it, below a quorum", quorum.Count(2), replies{found(4, 9), vote(5), vote(5)}, 10, true},
		{"rule 2: a fresh counter above one found", quorum.Count(2), replies{found(4, 6), vote(11), vote(5)}, 11, true},
		{"rule 2: recorded token 0 is no tenure", quorum.Count(2), replies{found(0, 3), found(0, 3), vote(2)}, 4, true},
		{"rule 2: fresh, a quorum issued it", quorum.Count(2), replies{vote(5), vote(5), vote(3)}, 5, false},
		{"rule 2: fresh, one issued the highest", quorum.Count(2), replies{vote(6), vote(5), vote(5)}, 6, true},
		{"rule 2: a refusal's counter does not count", quorum.Count(2), replies{vote(5), no(9), vote(5)}, 5, false},
		{"joint rule 1 needs both sets", quorum.Joint(0b0011, 2, 0b1100, 2), replies{found(4, 4), found(4, 4), vote(7), vote(7)}, 7, true},
	} {
		token, raise := familyKind.token(c.r, c.q)
		if token != c.token || raise != c.raise {
			t.Errorf("%s: token %d, raise %v; want %d, %v", c.name, token, raise, c.token, c.raise)
		}
	}
}

// TestEnoughFamily is the family's vote rule: an exclusive hold whose
// votes found the owner's lock waits for a quorum that agrees on the
// recorded token; a reader, and a hold whose votes found nothing, decide
// on the count alone.
func TestEnoughFamily(t *testing.T) {
	reader := familyKind.newSecret("{k}", &readerSpec.proto, "id", "", new(script.Hold))
	if familyKind.enough(&reader, quorum.Count(2)) != nil {
		t.Error("a reader has a vote rule beyond the count")
	}
	for _, k := range []kind{plainKind, permitKind} {
		s := k.newSecret("{k}", &script.Hold{Mode: keys.ModePermit, Permits: 2}, "id", "", new(script.Hold))
		if k.enough(&s, quorum.Count(2)) != nil {
			t.Errorf("%T has a vote rule beyond the count", k)
		}
	}
	writer := familyKind.newSecret("{k}", &writerSpec.proto, "id", "wait", new(script.Hold))
	enough := familyKind.enough(&writer, quorum.Count(2))
	if enough == nil {
		t.Fatal("a writer has no vote rule")
	}
	for _, c := range []struct {
		name string
		r    replies
		want bool
	}{
		{"nothing found: the count decides", replies{vote(3), vote(3)}, true},
		{"one found token 4: wait", replies{found(4, 4), vote(3)}, false},
		{"a quorum found token 4", replies{found(4, 4), vote(3), found(4, 5)}, true},
		{"two found different tokens: wait", replies{found(4, 4), found(3, 5)}, false},
		{"found token 0 is no tenure: wait", replies{found(0, 4), found(0, 4)}, false},
	} {
		if got := enough(c.r); got != c.want {
			t.Errorf("%s: enough %v, want %v", c.name, got, c.want)
		}
	}
}

// TestKindQuorum is each kind's quorum of n nodes: a majority, and for a
// permit of k, floor(n·k/(k+1)) + 1 (docs/safety.md, "Semaphores").
func TestKindQuorum(t *testing.T) {
	for _, c := range []struct {
		kind       kind
		permits, n int
		want       int
	}{
		{plainKind, 0, 1, 1}, {plainKind, 0, 3, 2}, {plainKind, 0, 5, 3},
		{familyKind, 0, 4, 3},
		{permitKind, 1, 3, 2}, {permitKind, 2, 3, 3}, {permitKind, 3, 5, 4}, {permitKind, 1, 5, 3},
	} {
		if got := c.kind.quorum(c.n, &script.Hold{Permits: c.permits}); got != c.want {
			t.Errorf("%T of %d permits on %d nodes: quorum %d, want %d", c.kind, c.permits, c.n, got, c.want)
		}
	}
}

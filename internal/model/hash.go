package model

import "math/bits"

// hasher folds a state's fields into a 64-bit hash for the visited set,
// one round per field: xxHash64's round for a trailing 8-byte lane, and
// its avalanche at the end (sum). The searches hash every state they
// reach; encoding each field as a varint into a buffer for maphash took
// more than a quarter of make model's CPU. Lists of varying length add
// their length first, so that two states cannot fold alike by moving a
// boundary.
type hasher struct{ acc uint64 }

// xxHash64's primes.
const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
	prime5 uint64 = 2870177450012600261
)

// v folds x into the hash.
func (h *hasher) v(x int64) {
	k := bits.RotateLeft64(uint64(x)*prime2, 31) * prime1
	h.acc = bits.RotateLeft64(h.acc^k, 27)*prime1 + prime4
}

// sum is the hash of what was folded in.
func (h *hasher) sum() uint64 {
	a := h.acc
	a ^= a >> 33
	a *= prime2
	a ^= a >> 29
	a *= prime3
	return a ^ a>>32
}

// Hash is a hash of s for the visited set. Grants are summarized by what
// the properties can still use: the tokens and validity ends.
func (s *State) Hash() uint64 {
	h := &hasher{acc: prime5}
	h.v(s.T)
	for i := range s.Nodes {
		n := &s.Nodes[i]
		h.v(n.Offset)
		h.v(int64(n.Run))
		h.v(n.Start)
		h.v(b2i(n.Replica))
		h.v(n.DownUntil)
		for _, d := range []*Data{&n.Data, &n.Copy, &n.Snap} {
			hashData(h, d)
		}
		h.v(n.SnapAt)
		h.v(n.LostAt)
		h.v(b2i(n.Lost))
		h.v(b2i(n.LostKept))
		h.v(n.LostReal)
	}
	for i := range s.Clients {
		hashClient(h, &s.Clients[i])
	}
	for _, cn := range s.Conns {
		h.v(int64(len(cn.Req)))
		for _, q := range cn.Req {
			hashMsg(h, &q)
			hashRec(h, q.Rec)
		}
		h.v(int64(len(cn.Rep)))
		for _, q := range cn.Rep {
			hashMsg(h, &q)
			hashConf(h, q.Recs)
			if q.Recs != nil {
				h.v(q.RecNow)
			}
		}
	}
	h.v(int64(len(s.Grants)))
	for _, g := range s.Grants {
		h.v(g.Began)
		h.v(int64(g.Client))
		h.v(int64(g.Value))
		h.v(g.Token)
		h.v(g.At)
		h.v(g.End)
		h.v(int64(g.Origin))
		h.v(int64(g.Saw))
	}
	h.v(int64(len(s.Forms)))
	for _, f := range s.Forms {
		h.v(int64(f.From))
		h.v(int64(f.Origin))
		h.v(int64(f.Resumes))
	}
	h.v(int64(s.NextRun))
	h.v(int64(s.NextVal))
	h.v(int64(s.NextID))
	for _, f := range s.Faults {
		h.v(int64(f))
	}
	for _, r := range s.Route {
		for _, x := range r {
			h.v(int64(x))
		}
	}
	return h.sum()
}

// hashData adds a node's data set to a hash. The waiters mark is left
// out: nothing but a release's notification reads it.
func hashData(h *hasher, d *Data) {
	h.v(int64(d.Lock.Owner))
	h.v(d.Lock.Exp)
	f := &d.Fam
	h.v(b2i(f.OK))
	if f.OK {
		h.v(int64(f.Mode))
		h.v(int64(f.K))
		h.v(int64(f.Owner))
		h.v(f.T)
		h.v(f.Exp)
		h.v(int64(len(f.Holds)))
		for _, hd := range f.Holds {
			h.v(int64(hd.ID))
			h.v(hd.Exp)
		}
	}
	h.v(b2i(d.WWait.OK))
	h.v(d.WWait.Exp)
	h.v(b2i(d.Fence.OK))
	h.v(d.Fence.V)
	h.v(d.Fence.Exp)
	h.v(b2i(d.Ok.OK))
	h.v(d.Ok.MaxTTL)
	h.v(d.Ok.Floor)
	h.v(d.Ok.Exp)
	r := d.Rec
	h.v(b2i(r.OK))
	h.v(int64(r.Run))
	h.v(r.Base)
	h.v(r.MaxTTL)
	h.v(int64(r.Kind))
	h.v(r.Check)
	h.v(r.Until)
	h.v(b2i(r.Changed))
	h.v(int64(d.ID))
	hashConf(h, d.Conf)
	h.v(int64(len(d.Tombs)))
	for _, t := range d.Tombs {
		h.v(int64(t.Secret))
		h.v(t.Exp)
	}
}

// hashClient adds a client's state to a hash.
func hashClient(h *hasher, c *Client) {
	h.v(int64(c.Phase))
	h.v(int64(c.AcqLeft))
	h.v(int64(c.RefLeft))
	h.v(int64(c.Value))
	h.v(int64(c.Round))
	h.v(c.Start)
	h.v(c.ValidUntil)
	h.v(c.NewValid)
	h.v(c.Token)
	h.v(int64(c.Grant))
	r := &c.Rec
	h.v(int64(r.Phase))
	h.v(int64(r.Round))
	h.v(b2i(r.All))
	h.v(r.Began)
	h.v(r.Start)
	h.v(b2i(r.Has))
	h.v(r.Last)
	h.v(b2i(r.Conflict))
	h.v(b2i(r.PConflict))
	h.v(r.Floor)
	h.v(r.PFloor)
	h.v(int64(r.Saw))
	h.v(int64(r.PSaw))
	for i := range r.Votes {
		h.v(int64(r.Votes[i]))
		h.v(r.Reps[i].Now)
		h.v(r.Reps[i].At)
		hashConf(h, r.Reps[i].F)
	}
	for i := range c.Votes {
		h.v(int64(c.Votes[i]))
		h.v(c.Tokens[i])
		h.v(b2i(c.FirstYes[i]))
		h.v(b2i(c.Existed[i]))
		h.v(c.Counters[i])
	}
	l := &c.Life
	for _, n := range []string{l.Names.Cur, l.Names.Next, l.Names.CurAlias, l.Names.NextAlias} {
		hashString(h, n)
	}
	h.v(b2i(l.Started))
	h.v(b2i(l.Early))
	h.v(int64(l.Form))
	h.v(int64(l.Forms))
	h.v(int64(l.Saw))
	h.v(int64(l.Held.Kind))
	h.v(int64(l.Held.Owner))
	h.v(int64(l.Held.K))
	h.v(int64(l.Held.Secret))
	h.v(l.Held.Token)
	h.v(int64(len(l.IDs)))
	for _, id := range l.IDs {
		h.v(int64(id))
	}
	h.v(int64(l.Unknown))
	h.v(b2i(l.Invalid))
}

// hashMsg adds a request's or a reply's fields to a hash.
func hashMsg(h *hasher, q *Msg) {
	h.v(int64(q.Actor))
	h.v(q.Tok)
	h.v(int64(q.Kind))
	h.v(int64(q.Round))
	h.v(int64(q.Value))
	h.v(q.Arg)
	h.v(int64(q.Status))
	h.v(q.N)
	h.v(b2i(q.Existed))
	h.v(q.Counter)
	h.v(int64(q.Owner))
	h.v(int64(q.Node))
	h.v(int64(q.ID))
	if f := q.Claim; f != nil {
		h.v(int64(f.Kind))
		h.v(int64(f.Owner))
		h.v(int64(f.K))
		h.v(int64(f.Secret))
		h.v(f.Token)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

package model

import (
	"encoding/binary"
	"hash/maphash"
)

var seed = maphash.MakeSeed()

// Hash is a hash of s for the visited set. Grants are summarized by what
// the properties can still use: the tokens and validity ends.
func (s *State) Hash() uint64 {
	b := make([]byte, 0, 512)
	v := func(x int64) { b = binary.AppendVarint(b, x) }
	v(s.T)
	for _, n := range s.Nodes {
		v(n.Offset)
		v(int64(n.Run))
		v(n.Start)
		v(b2i(n.Replica))
		v(n.DownUntil)
		for _, d := range []*Data{&n.Data, &n.Copy, &n.Snap} {
			hashData(v, d)
		}
		v(n.SnapAt)
		v(n.LostAt)
		v(b2i(n.Lost))
		v(b2i(n.LostKept))
		v(n.LostReal)
	}
	for i := range s.Clients {
		hashClient(v, &s.Clients[i])
	}
	for _, cn := range s.Conns {
		v(int64(len(cn.Req)))
		for _, q := range cn.Req {
			hashMsg(v, &q)
			hashRec(v, q.Rec)
		}
		v(int64(len(cn.Rep)))
		for _, q := range cn.Rep {
			hashMsg(v, &q)
			hashConf(v, q.Recs)
		}
	}
	for _, g := range s.Grants {
		v(g.Began)
		v(int64(g.Client))
		v(int64(g.Value))
		v(g.Token)
		v(g.At)
		v(g.End)
		v(int64(g.Origin))
		v(int64(g.Saw))
	}
	for _, f := range s.Forms {
		v(int64(f.From))
		v(int64(f.Origin))
		v(int64(f.Resumes))
	}
	v(int64(s.NextRun))
	v(int64(s.NextVal))
	v(int64(s.NextID))
	for _, f := range s.Faults {
		v(int64(f))
	}
	for _, r := range s.Route {
		for _, x := range r {
			v(int64(x))
		}
	}
	return maphash.Bytes(seed, b)
}

// hashData adds a node's data set to a hash. The waiters mark is left
// out: nothing but a release's notification reads it.
func hashData(v func(int64), d *Data) {
	v(int64(d.Lock.Owner))
	v(d.Lock.Exp)
	f := &d.Fam
	v(b2i(f.OK))
	if f.OK {
		v(int64(f.Mode))
		v(int64(f.K))
		v(int64(f.Owner))
		v(f.T)
		v(f.Exp)
		for _, h := range f.Holds {
			v(int64(h.ID))
			v(h.Exp)
		}
	}
	v(b2i(d.WWait.OK))
	v(d.WWait.Exp)
	v(b2i(d.Fence.OK))
	v(d.Fence.V)
	v(d.Fence.Exp)
	v(b2i(d.Ok.OK))
	v(d.Ok.MaxTTL)
	v(d.Ok.Floor)
	v(d.Ok.Exp)
	r := d.Rec
	v(b2i(r.OK))
	v(int64(r.Run))
	v(r.Base)
	v(r.MaxTTL)
	v(int64(r.Kind))
	v(r.Check)
	v(r.Until)
	v(b2i(r.Changed))
	v(int64(d.ID))
	hashConf(v, d.Conf)
	for _, t := range d.Tombs {
		v(int64(t.Secret))
		v(t.Exp)
	}
}

// hashClient adds a client's state to a hash.
func hashClient(v func(int64), c *Client) {
	v(int64(c.Phase))
	v(int64(c.AcqLeft))
	v(int64(c.RefLeft))
	v(int64(c.Value))
	v(int64(c.Round))
	v(c.Start)
	v(c.ValidUntil)
	v(c.NewValid)
	v(c.Token)
	v(int64(c.Grant))
	r := &c.Rec
	v(int64(r.Phase))
	v(int64(r.Round))
	v(b2i(r.All))
	v(r.Began)
	v(r.Start)
	v(b2i(r.Has))
	v(r.Last)
	v(b2i(r.Conflict))
	v(b2i(r.PConflict))
	v(r.Floor)
	v(r.PFloor)
	v(int64(r.Saw))
	v(int64(r.PSaw))
	for i := range r.Votes {
		v(int64(r.Votes[i]))
		v(r.Reps[i].Now)
		v(r.Reps[i].At)
		hashConf(v, r.Reps[i].F)
	}
	for i := range c.Votes {
		v(int64(c.Votes[i]))
		v(c.Tokens[i])
		v(b2i(c.FirstYes[i]))
		v(b2i(c.Existed[i]))
		v(c.Counters[i])
	}
	l := &c.Life
	for _, n := range []string{l.Names.Cur, l.Names.Next, l.Names.CurAlias, l.Names.NextAlias} {
		hashString(v, n)
	}
	v(b2i(l.Started))
	v(b2i(l.Early))
	v(int64(l.Form))
	v(int64(l.Forms))
	v(int64(l.Saw))
	v(int64(l.Held.Kind))
	v(int64(l.Held.Owner))
	v(int64(l.Held.K))
	v(int64(l.Held.Secret))
	v(l.Held.Token)
	for _, id := range l.IDs {
		v(int64(id))
	}
	v(int64(l.Unknown))
	v(b2i(l.Invalid))
}

// hashMsg adds a request's or a reply's fields to a hash.
func hashMsg(v func(int64), q *Msg) {
	v(int64(q.Actor))
	v(q.Tok)
	v(int64(q.Kind))
	v(int64(q.Round))
	v(int64(q.Value))
	v(q.Arg)
	v(int64(q.Status))
	v(q.N)
	v(b2i(q.Existed))
	v(q.Counter)
	v(int64(q.Owner))
	v(int64(q.Node))
	v(int64(q.ID))
	if f := q.Claim; f != nil {
		v(int64(f.Kind))
		v(int64(f.Owner))
		v(int64(f.K))
		v(int64(f.Secret))
		v(f.Token)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

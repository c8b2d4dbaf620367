package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
)

// envNextNodes is the next set of nodes of a move (--next-nodes).
const envNextNodes = "REDLOCK_NEXT_NODES"

// nextFlag is --next-nodes: the next set of nodes while a deployment moves
// from the nodes of --nodes to these (docs/reconfiguration.md).
type nextFlag struct{ list string }

func (f *nextFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&f.list, "next-nodes", "", "comma-separated Redis URLs of the next set of nodes while the deployment\nmoves to them from --nodes: joint configuration (docs/reconfiguration.md)\n(default $"+envNextNodes+")")
}

// resolve parses the next nodes, with the passwords of nf; none when not
// given.
func (f *nextFlag) resolve(nf *nodeFlags) ([]*nodeSpec, []string, error) {
	list := f.list
	if list == "" {
		list = os.Getenv(envNextNodes)
	}
	if strings.TrimSpace(list) == "" {
		return nil, nil, nil
	}
	next := nodeFlags{nodes: list, passwordFile: nf.passwordFile, timeout: nf.timeout, tls: nf.tls}
	specs, secrets, err := next.resolve()
	if err != nil {
		return nil, nil, usagef("--next-nodes: %s", strings.TrimPrefix(err.Error(), "--nodes: "))
	}
	return specs, secrets, nil
}

// nextOption is WithNextNodes of the open next nodes (none: no option).
func nextOption(next []conn) []redlock.Option {
	if len(next) == 0 {
		return nil
	}
	ns := make([]driver.Node, len(next))
	for i, c := range next {
		ns[i] = goredis.New(c.rc)
	}
	return []redlock.Option{redlock.WithNextNodes(ns...)}
}

// addrOf is a node's address as the library names it (driver.Info.Addr).
func addrOf(rc redis.UniversalClient) string { return goredis.New(rc).Info().Addr }

// joinConns returns the nodes of both sets, each once (matched by
// address, as the library matches them), and the two sets as masks of
// them. Nodes of next that are also current are closed by closeAll of
// the extra conns returned.
func joinConns(cur, next []conn) (all []conn, a, b uint64) {
	all = append(all, cur...)
	a = quorum.Mask(len(cur), func(int) bool { return true })
	for _, n := range next {
		j := -1
		for i, c := range all {
			if addrOf(c.rc) == addrOf(n.rc) {
				j = i
				break
			}
		}
		if j < 0 {
			j = len(all)
			all = append(all, n)
		}
		b |= 1 << j
	}
	return all, a, b
}

// readRecords reads the configuration records of every node, read-only,
// as joint.StepOf takes them (ms; nil for a node that did not answer).
func readRecords(ctx context.Context, conns []conn, prefix string, timeout time.Duration) []*joint.Records {
	key := keys.Layout{Prefix: prefix}.Configs()
	out := make([]*joint.Records, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			pipe := c.rc.Pipeline()
			all := pipe.HGetAll(nctx, key)
			now := pipe.Time(nctx)
			if _, err := pipe.Exec(nctx); err != nil {
				return
			}
			t := now.Val().UnixMilli()
			rc := &joint.Records{Now: t, Fields: map[string]joint.Value{}}
			for f, v := range all.Val() {
				// expiry[:M[:V]] (record.lua); fields past their expiry
				// are not live.
				parts := strings.Split(v, ":")
				var n [3]int64
				for j := range min(len(parts), 3) {
					n[j], _ = strconv.ParseInt(parts[j], 10, 64)
				}
				if n[0] <= t {
					continue
				}
				val := joint.Value{Left: n[0] - t, Floor: n[1]}
				if n[2] != 0 {
					val.Fresh = n[2] - t
				}
				rc.Fields[f] = val
			}
			out[i] = rc
		})
	}
	wg.Wait()
	return out
}

// readIdentities reads every node's identity (keys.Layout.NodeID, which a
// library Client writes at its first contact), read-only: "" for a node
// that has none or did not answer.
func readIdentities(ctx context.Context, conns []conn, prefix string, timeout time.Duration) []string {
	key := keys.Layout{Prefix: prefix}.NodeID()
	out := make([]string, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i], _ = c.rc.Get(nctx, key).Result()
		})
	}
	wg.Wait()
	return out
}

// otherClient names the Client of record field f (c:X, s:X or j:X:Y) that
// joint.StepOf counts as on neither set of a move.
func otherClient(f string) string {
	if a, b, ok := keys.ParseConfigJoint(f); ok {
		return fmt.Sprintf("a joint Client moving from node set %s to %s was seen (record %s)", a, b, f)
	}
	return fmt.Sprintf("a Client on a node set the doctor does not know was seen (record %s): a Client of an earlier release given the nodes under other addresses than the doctor's, one that reaches them under other addresses and had not yet read their identities, or one of another deployment under this prefix", f)
}

// moveCheck is doctor's check of a move from the nodes of cur to those of
// next: which step of the runbook is safe next, read from the
// configuration records by joint.StepOf (the rule the model checker's
// runbook follows too).
func moveCheck(ctx context.Context, cur, next []conn, prefix string, timeout time.Duration) check {
	all, a, b := joinConns(cur, next)
	ids := readIdentities(ctx, all, prefix, timeout)
	// A set's fingerprint is its nodes' identities' (keys.Member), as the
	// library names it; its alias by addresses is how releases before
	// issue 44 named it, which the library writes too (joint.Sets).
	fp := func(set uint64, byAddr bool) string {
		var members []string
		for i, c := range all {
			if set&(1<<i) != 0 {
				if byAddr {
					members = append(members, addrOf(c.rc))
				} else {
					members = append(members, keys.Member(ids[i], addrOf(c.rc)))
				}
			}
		}
		return keys.Fingerprint(members)
	}
	fa, fb := fp(a, false), fp(b, false)
	recs := readRecords(ctx, all, prefix, timeout)
	r := joint.StepOf(recs, a, b, joint.SetName{FP: fa, Alias: fp(a, true)}, joint.SetName{FP: fb, Alias: fp(b, true)}, joint.Mut{})
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	nodes := func(idx []int) string {
		var names []string
		for _, i := range idx {
			names = append(names, all[i].spec.String())
		}
		return strings.Join(names, ", ")
	}
	var missing []int
	for i, rc := range recs {
		if rc == nil {
			missing = append(missing, i)
		}
	}
	c := check{Check: "move", Node: "all", Verdict: verdictOK}
	sets := fmt.Sprintf("current set %s, next set %s", fa, fb)
	switch r.Step {
	case joint.StepBoth:
		c.Verdict = verdictFail
		c.Detail = fmt.Sprintf("Clients of the current set alone and of the next set alone are both live (for another %v and %v): they can hold one lock at once; roll the next-set Clients back to joint (%s)",
			ms(r.LeftA), ms(r.LeftB), sets)
	case joint.StepOne:
		c.Detail = "next: step 1, roll every service to joint configuration (--next-nodes, WithNextNodes); no joint Client has recorded yet (" + sets + ")"
	case joint.StepWait:
		c.Detail = fmt.Sprintf("next: step 2, wait: a Client of the current set alone was seen, and may hold locks for another %v; step 3 is safe once it is gone (%s)",
			ms(r.LeftA), sets)
	case joint.StepUnknown:
		c.Verdict = verdictWarn
		c.Detail = "unknown: nodes " + nodes(missing) + " did not answer, and may hold the records of Clients of the current set alone (" + sets + ")"
	case joint.StepOther:
		c.Detail = fmt.Sprintf("next: step 2, wait: %s, alive or holding locks for another %v, and not on the next set; step 3 is safe once it is gone (%s)",
			otherClient(r.Other), ms(r.LeftOther), sets)
	case joint.StepFloor:
		c.Detail = "next: step 2, wait: no Client of the current set alone was seen, but nodes " + nodes(r.Stale) +
			" of the next set lack a move floor that a running joint Client raised within the max TTL / 2; step 3 becomes safe once a joint Client has recorded with every node answering (" + sets + ")"
	case joint.StepThree:
		c.Detail = "next: step 3 is safe, roll every service to the next set alone: no Client of the current set alone was seen within the max TTL, and every node of the next set holds a fresh move floor (" + sets + ")"
	case joint.StepDone:
		c.Detail = "done: only Clients of the next set alone recorded (" + sets + ")"
	default:
		c.Verdict = verdictWarn
		c.Detail = "no Client recorded either set (records off, an older library, or no obtain yet): nothing to tell the step from (" + sets + ")"
	}
	return c
}

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
	next := nodeFlags{nodes: list, passwordFile: nf.passwordFile, timeout: nf.timeout}
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

// moveRecords are the configuration records of one node (keys.Configs):
// each live field's time left; err when the node did not answer.
type moveRecords struct {
	left map[string]time.Duration
	err  error
}

// readRecords reads the configuration records of every node, read-only.
func readRecords(ctx context.Context, conns []conn, prefix string, timeout time.Duration) []moveRecords {
	key := keys.Layout{Prefix: prefix}.Configs()
	out := make([]moveRecords, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			pipe := c.rc.Pipeline()
			all := pipe.HGetAll(nctx, key)
			now := pipe.Time(nctx)
			if _, err := pipe.Exec(nctx); err != nil {
				out[i].err = err
				return
			}
			t := now.Val().UnixMilli()
			out[i].left = map[string]time.Duration{}
			for f, v := range all.Val() {
				exp, _, _ := strings.Cut(v, ":")
				if e, err := strconv.ParseInt(exp, 10, 64); err == nil && e > t {
					out[i].left[f] = time.Duration(e-t) * time.Millisecond
				}
			}
		})
	}
	wg.Wait()
	return out
}

// moveCheck is doctor's check of a move from the nodes of cur to those of
// next: which step of the runbook is safe next, read from the
// configuration records.
func moveCheck(ctx context.Context, cur, next []conn, prefix string, timeout time.Duration) check {
	all, a, b := joinConns(cur, next)
	fp := func(set uint64) string {
		var addrs []string
		for i, c := range all {
			if set&(1<<i) != 0 {
				addrs = append(addrs, goredis.New(c.rc).Info().Addr)
			}
		}
		return keys.Fingerprint(addrs)
	}
	fa, fb := fp(a), fp(b)
	recs := readRecords(ctx, all, prefix, timeout)
	var (
		aloneA, aloneB time.Duration // the longest evidence left
		joint          bool
		missing        []string
	)
	for i, r := range recs {
		if r.err != nil {
			missing = append(missing, all[i].spec.String())
			continue
		}
		for f, left := range r.left {
			switch f {
			case keys.ConfigSingle(fa), keys.ConfigSeen(fa):
				aloneA = max(aloneA, left)
			case keys.ConfigSingle(fb), keys.ConfigSeen(fb):
				aloneB = max(aloneB, left)
			case keys.ConfigJoint(fa, fb):
				joint = true
			}
		}
	}
	c := check{Check: "move", Node: "all", Verdict: verdictOK}
	sets := fmt.Sprintf("current set %s, next set %s", fa, fb)
	switch {
	case aloneA > 0 && aloneB > 0:
		c.Verdict = verdictFail
		c.Detail = fmt.Sprintf("Clients of the current set alone and of the next set alone are both live (for another %v and %v): they can hold one lock at once; roll the next-set Clients back to joint (%s)",
			aloneA.Round(time.Millisecond), aloneB.Round(time.Millisecond), sets)
	case aloneA > 0 && !joint:
		c.Detail = "next: step 1, roll every service to joint configuration (--next-nodes, WithNextNodes); no joint Client has recorded yet (" + sets + ")"
	case aloneA > 0:
		c.Detail = fmt.Sprintf("next: step 2, wait: a Client of the current set alone was seen, and may hold locks for another %v; step 3 is safe once it is gone (%s)",
			aloneA.Round(time.Millisecond), sets)
	case len(missing) > 0:
		c.Verdict = verdictWarn
		c.Detail = "unknown: nodes " + strings.Join(missing, ", ") + " did not answer, and may hold the records of Clients of the current set alone (" + sets + ")"
	case joint:
		c.Detail = "next: step 3 is safe, roll every service to the next set alone: no Client of the current set alone was seen within the max TTL (" + sets + ")"
	case aloneB > 0:
		c.Detail = "done: only Clients of the next set alone recorded (" + sets + ")"
	default:
		c.Verdict = verdictWarn
		c.Detail = "no Client recorded either set (records off, an older library, or no obtain yet): nothing to tell the step from (" + sets + ")"
	}
	return c
}

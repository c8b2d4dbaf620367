package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/keys"
)

// nodeEpoch is a node's epoch record as doctor read it, for the check
// "recovery".
type nodeEpoch struct {
	read bool // the record was asked for (not a Cluster, guard not off)
	rec  epochRecord
	err  error
}

// readEpochs reads the epoch record of every node that is not a Redis
// Cluster (whose records are per lock) and that answered the probe, under
// prefix, into probes. With the guard off no record matters, and none is
// read.
func readEpochs(ctx context.Context, cfg doctorConfig, conns []conn, probes []nodeProbe) {
	if cfg.guard.mode == guardOff {
		return
	}
	key := keys.Layout{Prefix: cfg.prefix}.NodeEpoch()
	var wg sync.WaitGroup
	for i, c := range conns {
		if c.spec.kind == cluster || probes[i].err != nil {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 3*cfg.timeout)
			defer cancel()
			rec, err := readEpoch(cctx, c.rc, key)
			probes[i].epoch = nodeEpoch{read: true, rec: rec, err: nodeErr(err)}
		})
	}
	wg.Wait()
}

// recoveryCheck judges a node's recovery window, read from its epoch
// record, against --max-ttl: the record keeps the largest max TTL any
// guarded Client has sent since the node's epoch began, and the node
// recovers for that long after its restart, for every Client. A window
// longer than --max-ttl that is still running refuses every lock of the
// correctly configured Clients; doctor fails it and names the way out.
func recoveryCheck(cfg doctorConfig, p nodeProbe) (string, string) {
	e := p.epoch
	switch {
	case cfg.guard.mode == guardOff:
		return verdictSkip, "the restart guard is off: no epoch record is read or written"
	case p.spec.kind == cluster:
		return verdictSkip, "a Redis Cluster keeps one epoch record per lock: see \"redlock inspect NAME\""
	case !e.read:
		return verdictSkip, "not read"
	case e.err != nil:
		return verdictWarn, fmt.Sprintf("cannot read the epoch record: %v", e.err)
	}
	r := e.rec
	own := cfg.guard.maxTTL
	window := r.window()
	switch {
	case r.present && !r.restarted() && window > own && r.left() > 0:
		return verdictFail, withRemedy(fmt.Sprintf("recovering for another %v: the epoch record %s holds a max TTL of %v, longer than --max-ttl %v (a Client with a larger WithMaxTTL raised it), and refuses every lock until %s (%s)",
			r.left().Round(time.Second), r.key, window, own, nodeTime(r.until), wayOutOn(p, r)), wayOut(r, own))
	case r.present && !r.restarted() && window > own:
		return verdictWarn, withRemedy(fmt.Sprintf("the epoch record %s holds a max TTL of %v, longer than --max-ttl %v: a Client with a larger WithMaxTTL used this node since %s; its window has ended, but every Client must use the same max TTL (%s)",
			r.key, window, own, nodeTime(r.base), wayOutOn(p, r)), wayOut(r, own))
	}
	v := nodeVote(cfg, p)
	if v.now {
		return verdictOK, v.why
	}
	return verdictWarn, "not voting: " + v.why
}

// nodeVote is when the node votes (voteTime), for a node whose epoch
// record was read; a node whose record was not read (a Cluster, the guard
// off, no answer) is taken to vote when it answered.
func nodeVote(cfg doctorConfig, p nodeProbe) vote {
	if !p.epoch.read || p.epoch.err != nil {
		return vote{now: p.err == nil}
	}
	uptime, replica := uptimeOf(p)
	return voteTime(cfg.guard, p.epoch.rec, uptime, replica)
}

// wayOut names the operator's way out of a recovery window longer than
// --max-ttl, as a remedy said once for every node that needs it: the
// command that lowers the record, and the condition under which it is
// safe (docs/fencing.md). The row says which host and when its epoch
// began (wayOutOn).
func wayOut(r epochRecord, own time.Duration) string {
	return fmt.Sprintf("A recovery window longer than --max-ttl (docs/fencing.md, \"A recovery window longer than the max TTL\"). Way out: first stop or fix every Client with the larger max TTL; then, on each node whose row names this remedy, and only if no lock with a TTL above %v was live when its epoch began (the row says when), for example because those Clients first locked after it, lower the record (with redis-cli and your connection options) with: EVAL %s 1 %s %d",
		own, strconv.Quote(lowerEpochScript), shellQuote(r.key), own.Milliseconds())
}

// wayOutOn is the part of the way out that is the node's own: its host
// and when its epoch began.
func wayOutOn(p nodeProbe, r epochRecord) string {
	host := p.spec.label
	if len(p.servers) == 1 && p.servers[0].err == nil {
		host = p.servers[0].addr
	}
	return fmt.Sprintf("host %s, epoch began %s", host, nodeTime(r.base))
}

// nodeTime formats a node time in ms as UTC.
func nodeTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// short is the first 8 characters of a run_id.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// shellQuote quotes s for a POSIX shell (a record key holds braces).
func shellQuote(s string) string {
	out := "'"
	for _, c := range s {
		if c == '\'' {
			out += `'\''`
			continue
		}
		out += string(c)
	}
	return out + "'"
}

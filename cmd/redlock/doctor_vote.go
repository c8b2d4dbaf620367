package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// vote is when a node votes for a Client with doctor's --max-ttl and
// --restart-guard, as voteTime computes it.
type vote struct {
	// now: the node votes at once.
	now bool
	// at is the node time (ms) from which it votes, when known.
	at int64
	// afterAcquire is set when the node's recovery starts only at its
	// next guarded acquire and lasts this long from then (at is then the
	// end for an acquire made now).
	afterAcquire time.Duration
	// why says it in words.
	why string
}

// voteTime says when a node votes, from its epoch record (read with the
// node's run_id and time), its uptime and whether it was a replica since
// its process started (INFO replication's master_replid2), under the
// restart guard as internal/script/epoch.lua implements it today:
//
//   - no record: a node that was never a replica recovers until its
//     process start (now − (uptime − 1 s)) plus the max TTL, counted from
//     the first guarded acquire but ending at the same time whenever it
//     comes; one that was a replica recovers for the max TTL from its
//     first guarded acquire;
//   - a record of another process (a restart with its data, a promotion):
//     the next guarded request (an acquire, or a Client's configuration
//     record) starts a new epoch that recovers for the max
//     TTL from then, unless the guard trusts persistence and the node was
//     never a replica (a restart then needs no recovery);
//   - a record of this process: until its base plus the largest of its
//     max TTL and --max-ttl.
//
// This is the one place doctor computes it: when the guard changes (a
// recovery window that starts at the restart, issue 48), this function
// changes with it.
func voteTime(guard guardFlags, r epochRecord, uptime time.Duration, replica bool) vote {
	own := guard.maxTTL
	switch {
	case guard.mode == guardOff:
		return vote{now: true, why: "the restart guard is off"}
	case !r.present && replica:
		return vote{afterAcquire: own, at: r.now + own.Milliseconds(),
			why: fmt.Sprintf("no epoch record, and a replica promoted since its process started: its first guarded acquire starts a recovery of --max-ttl %v (from %s if one came now)", own, nodeTime(r.now+own.Milliseconds()))}
	case !r.present:
		start := r.now - max(uptime-time.Second, 0).Milliseconds()
		at := start + own.Milliseconds()
		if at <= r.now {
			return vote{now: true, why: fmt.Sprintf("no epoch record yet; its process started at %s, more than --max-ttl %v ago: it votes at once", nodeTime(start), own)}
		}
		return vote{at: at, why: fmt.Sprintf("no epoch record yet; its process started at %s (up %v): it refuses every lock until %s, --max-ttl %v after its start", nodeTime(start), uptime, nodeTime(at), own)}
	case r.restarted() && guard.mode == guardPersistent && !replica:
		return vote{now: true, why: fmt.Sprintf("restarted since its epoch record was written (run_id %s, now %s), and --restart-guard persistent trusts its data: it votes at once", short(r.run), short(r.runID))}
	case r.restarted():
		return vote{afterAcquire: own, at: r.now + own.Milliseconds(),
			why: fmt.Sprintf("restarted since its epoch record was written (run_id %s, now %s), and no guarded Client has seen it yet: its next guarded request (an acquire, or a Client's configuration record, every max TTL / 4) starts a new epoch, and it refuses every lock for --max-ttl %v from then (until %s if one came now)", short(r.run), short(r.runID), own, nodeTime(r.now+own.Milliseconds()))}
	}
	until := r.base + max(r.maxTTL, own.Milliseconds())
	if guard.mode == guardPersistent && r.kind == "restart" {
		until = r.base
	}
	if until <= r.now {
		return vote{now: true, why: fmt.Sprintf("voting: the epoch began (%s) at %s, recovery window %v", r.kind, nodeTime(r.base), r.window())}
	}
	return vote{at: until, why: fmt.Sprintf("recovering after a %s for another %v (max TTL %v recorded): it votes from %s", r.kind, time.Duration(until-r.now)*time.Millisecond, r.window(), nodeTime(until))}
}

// uptimeOf is a node's uptime from INFO server, and whether it was a
// replica since its process started (master_replid2 set), as the epoch
// script reads them; from the node's first server that answered.
func uptimeOf(p nodeProbe) (uptime time.Duration, replica bool) {
	up := p.up()
	if len(up) == 0 {
		return 0, false
	}
	s, _ := strconv.Atoi(up[0].info["uptime_in_seconds"])
	id := up[0].info["master_replid2"]
	return time.Duration(s) * time.Second, id != "" && strings.Trim(id, "0") != ""
}

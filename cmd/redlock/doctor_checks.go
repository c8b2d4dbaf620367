package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
)

// diagnose turns the probes into checks.
func diagnose(cfg doctorConfig, probes []nodeProbe) []check {
	checks, _ := diagnoseSet(cfg, probes, "")
	return checks
}

// diagnoseSet turns the probes of one set of nodes into checks, and
// returns the nodes (by index) named by a failed check. set, when not
// empty, names the set ("current", "next") at the start of every row's
// node column: "next 0 redis://…", "next all".
func diagnoseSet(cfg doctorConfig, probes []nodeProbe, set string) ([]check, map[int]bool) {
	var checks []check
	prefix := ""
	if set != "" {
		prefix = set + " "
	}
	add := func(name, node, verdict, format string, args ...any) {
		if node == "all" {
			node = prefix + node
		}
		checks = append(checks, check{Check: name, Node: node, Verdict: verdict, Detail: fmt.Sprintf(format, args...)})
	}
	label := func(i int) string { return fmt.Sprintf("%s%d %s", prefix, i, probes[i].spec.label) }

	// Quorum arithmetic.
	n := len(probes)
	q := n/2 + 1
	switch {
	case n == 1:
		add("nodes", "all", verdictOK, "one node: the single-instance lock, no tolerance of a node failure")
	case n%2 == 0:
		add("nodes", "all", verdictWarn, "%d nodes, quorum %d: tolerates %d failure%s, like %d node%s, and two contenders can split the votes; use an odd number",
			n, q, n-q, plural(n-q), n-1, plural(n-1))
	default:
		add("nodes", "all", verdictOK, "%d nodes, quorum %d: tolerates %d failed node%s", n, q, n-q, plural(n-q))
	}

	// Reachability.
	for i, p := range probes {
		switch {
		case p.err != nil:
			add("reachable", label(i), verdictFail, "%v", p.err)
		case len(p.up()) < len(p.servers):
			add("reachable", label(i), verdictWarn, "%d of %d servers answered", len(p.up()), len(p.servers))
		default:
			add("reachable", label(i), verdictOK, "answers PING")
		}
	}

	checks = append(checks, distinctChecks(probes, prefix, label)...)

	// Per node, per server: persistence, eviction, version, latency, clock.
	type span struct{ lo, hi time.Duration }
	var clocks []span
	for i, p := range probes {
		servers := p.up()
		if len(servers) == 0 {
			continue
		}
		name := label(i)
		multi := len(servers) > 1
		at := func(sp serverProbe) string {
			if multi {
				return fmt.Sprintf("worst of %d servers, %s: ", len(servers), sp.addr)
			}
			return ""
		}
		// Each check reports the worst of the node's servers.
		worst := func(check string, judge func(sp serverProbe) (string, string)) {
			rank := map[string]int{verdictSkip: 0, verdictOK: 1, verdictWarn: 2, verdictFail: 3}
			best, detail := "", ""
			for _, sp := range servers {
				v, d := judge(sp)
				if best == "" || rank[v] > rank[best] {
					best, detail = v, at(sp)+d
				}
			}
			add(check, name, best, "%s", detail)
		}
		worst("persistence", func(sp serverProbe) (string, string) { return persistence(cfg, sp) })
		if cfg.guard.mode != guardOff {
			v, d := recoveryCheck(cfg, p)
			add("recovery", name, v, "%s", d)
		}
		worst("eviction", eviction)
		worst("version", redisVersion)
		worst("latency", func(sp serverProbe) (string, string) { return latency(cfg, sp) })
		worst("clock", func(sp serverProbe) (string, string) { return clock(cfg, sp) })
		for _, sp := range servers {
			if sp.timeErr == nil {
				clocks = append(clocks, span{sp.offset - sp.offsetErr, sp.offset + sp.offsetErr})
			}
		}
	}
	if len(clocks) > 1 {
		lo, hi := clocks[0], clocks[0]
		for _, c := range clocks[1:] {
			if c.lo+c.hi < lo.lo+lo.hi {
				lo = c
			}
			if c.lo+c.hi > hi.lo+hi.hi {
				hi = c
			}
		}
		spread := (hi.lo + hi.hi - lo.lo - lo.hi) / 2
		worstCase := hi.hi - lo.lo
		v := verdictOK
		if worstCase > cfg.budget() {
			v = verdictWarn
		}
		whose := "the nodes' clocks"
		for _, p := range probes {
			if len(p.up()) < len(p.servers) || p.err != nil {
				whose = "the clocks of the servers that answered (the others are unknown)"
				break
			}
		}
		add("clock spread", "all", v, "%s differ by up to %v (at most %v with round trips); drift budget %v (TTL %v × %v + 2ms)%s",
			whose, round(spread), round(worstCase), cfg.budget(), cfg.ttl, cfg.drift, clockNote(v))
	}

	// Sentinel's failure detection against the epoch guard.
	sentinels := false
	for i, p := range probes {
		if p.spec.kind != sentinel {
			continue
		}
		sentinels = true
		for _, a := range p.downAfter {
			if a.err != nil {
				add("sentinel", label(i), verdictWarn, "sentinel %s: %v", a.addr, nodeErr(a.err))
				continue
			}
			v, d := checkEpochDelta(a.downAfter)
			add("sentinel", label(i), v, "sentinel %s: %s", a.addr, d)
		}
		for _, sp := range p.up() {
			v, d := splitBrain(cfg, sp)
			add("split brain", label(i), v, "%s", d)
		}
	}
	// A master promoted during its process's life: on a Redis Cluster,
	// where each lock has its own epoch record, every lock name without a
	// record recovers for --max-ttl on its first use.
	for i, p := range probes {
		if p.spec.kind != cluster || cfg.guard.mode == guardOff {
			continue
		}
		var promoted []string
		for _, sp := range p.up() {
			if id := sp.info["master_replid2"]; id != "" && strings.Trim(id, "0") != "" {
				promoted = append(promoted, sp.addr)
			}
		}
		if len(promoted) == 0 {
			add("promoted", label(i), verdictOK, "no master was promoted since its process started")
			continue
		}
		add("promoted", label(i), verdictWarn, "%s promoted since %s process started: every lock name without an epoch record there recovers for --max-ttl (%v) on first use (docs/fencing.md, \"Redis Cluster\"); a restart of the process ends it",
			strings.Join(promoted, ", "), pick(len(promoted) == 1, "its", "their"), cfg.guard.maxTTL)
	}
	if !sentinels {
		add("sentinel", "all", verdictSkip, "no Sentinel-managed node")
	}
	sortChecks(checks)
	locate(checks, probes, set, label)
	// The nodes a failed check names: by its row's label, or the second
	// node of a pair (one server or one history counted twice).
	bad := map[int]bool{}
	for _, c := range checks {
		if c.Verdict != verdictFail {
			continue
		}
		for _, i := range c.nodes {
			bad[i] = true
		}
		for i := range probes {
			if c.Node == label(i) {
				bad[i] = true
			}
		}
	}
	return checks, bad
}

// checkOrder is the order of doctor's rows.
var checkOrder = []string{"nodes", "reachable", "distinct", "replica", "persistence", "recovery", "eviction", "clock", "clock spread", "latency", "version", "sentinel", "split brain", "promoted"}

func sortChecks(checks []check) {
	slices.SortStableFunc(checks, func(a, b check) int {
		return slices.Index(checkOrder, a.Check) - slices.Index(checkOrder, b.Check)
	})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// distinctChecks checks that no two nodes are one server, and that no node
// is a replica of, or shares a replication history with, another.
func distinctChecks(probes []nodeProbe, prefix string, label func(int) string) []check {
	describe := func(i int) string { return fmt.Sprintf("%s%d (%s)", prefix, i, probes[i].spec.label) }
	var checks []check
	add := func(name, node, verdict, format string, args ...any) {
		if node == "all" {
			node = prefix + node
		}
		checks = append(checks, check{Check: name, Node: node, Verdict: verdict, Detail: fmt.Sprintf(format, args...)})
	}
	// addPair adds a failed check of two nodes, the second of which is
	// counted as failed (the first still votes once).
	addPair := func(name string, pair [2]int, format string, args ...any) {
		checks = append(checks, check{Check: name, Node: fmt.Sprintf("%s%d, %d", prefix, pair[0], pair[1]), Verdict: verdictFail,
			Detail: fmt.Sprintf(format, args...), nodes: []int{pair[1]}, Pair: []int{pair[0], pair[1]}})
	}
	type where struct {
		node int
		addr string
	}
	runIDs := map[string][]where{}
	replIDs := map[string][]where{}
	for i, p := range probes {
		for _, sp := range p.up() {
			if id := sp.info["run_id"]; id != "" {
				runIDs[id] = append(runIDs[id], where{i, sp.addr})
			}
			if id := sp.info["master_replid"]; id != "" && strings.Trim(id, "0") != "" {
				replIDs[id] = append(replIDs[id], where{i, sp.addr})
			}
		}
	}
	// Pairs of nodes, each reported once.
	samePairs := map[[2]int]string{}
	for id, ws := range runIDs {
		for a := range ws {
			for b := a + 1; b < len(ws); b++ {
				if ws[a].node != ws[b].node {
					samePairs[[2]int{min(ws[a].node, ws[b].node), max(ws[a].node, ws[b].node)}] = id
				}
			}
		}
	}
	for _, pair := range sortedPairs(samePairs) {
		addPair("distinct", pair,
			"nodes %s and %s are the same redis-server process (run_id %.12s…): one server would cast two votes",
			describe(pair[0]), describe(pair[1]), samePairs[pair])
	}
	if len(samePairs) == 0 {
		v, d := distinctVerdict(probes)
		add("distinct", "all", v, "%s", d)
	}

	// Replicas given as nodes, and which node each replicates, known by
	// a shared replication id, by the master's address, or by the
	// master's list of its replicas.
	replicaOf := map[[2]int]bool{}
	for i, p := range probes {
		if p.spec.kind == cluster {
			continue // a cluster's own replicas are part of the node
		}
		for _, sp := range p.up() {
			if sp.info["role"] != "slave" {
				add("replica", label(i), verdictOK, "a master")
				continue
			}
			master := net.JoinHostPort(sp.info["master_host"], sp.info["master_port"])
			other := ""
			for j, q := range probes {
				if j == i {
					continue
				}
				for _, s2 := range q.up() {
					if s2.info["master_replid"] == sp.info["master_replid"] || sameEndpoint(s2.addr, master) || hasReplica(s2.info, sp.addr) {
						other = ", which is node " + describe(j)
						replicaOf[[2]int{min(i, j), max(i, j)}] = true
					}
				}
			}
			add("replica", label(i), verdictFail, "a replica of %s%s: a lock node must be an independent master", master, other)
		}
	}
	// Nodes that share a replication history (a replica promoted from
	// another node, or both replicas of one master).
	shared := map[[2]int]string{}
	for id, ws := range replIDs {
		for a := range ws {
			for b := a + 1; b < len(ws); b++ {
				pair := [2]int{min(ws[a].node, ws[b].node), max(ws[a].node, ws[b].node)}
				if ws[a].node != ws[b].node && !replicaOf[pair] && samePairs[pair] == "" {
					shared[pair] = id
				}
			}
		}
	}
	for _, pair := range sortedPairs(shared) {
		addPair("replica", pair,
			"nodes %s and %s share a replication history (master_replid %.12s…): they are not independent",
			describe(pair[0]), describe(pair[1]), shared[pair])
	}
	return checks
}

// distinctVerdict is the verdict of the distinct check when no two nodes
// that answered are one process: it says which nodes were compared, and
// that nothing is known of those that did not answer (fully).
func distinctVerdict(probes []nodeProbe) (verdict, detail string) {
	var known, unknown []string
	for i, p := range probes {
		if p.err == nil && len(p.servers) > 0 && len(p.up()) == len(p.servers) {
			known = append(known, strconv.Itoa(i))
		} else {
			unknown = append(unknown, strconv.Itoa(i))
		}
	}
	switch {
	case len(unknown) == 0:
		return verdictOK, "every node is a different redis-server process (run_id)"
	case len(known) == 0:
		return verdictSkip, "no node answered: nothing compared, unknown whether any two are one redis-server process"
	case len(known) == 1:
		return verdictWarn, fmt.Sprintf("only node %s answered: nothing compared; unknown whether %s %s the same redis-server process as another node", known[0], nodeList(unknown), pick(len(unknown) == 1, "is", "are"))
	}
	return verdictWarn, fmt.Sprintf("%s are different redis-server processes (run_id); unknown for %s, which did not answer (fully)", nodeList(known), nodeList(unknown))
}

// nodeList names nodes by index: "node 1", "nodes 0, 2".
func nodeList(idx []string) string {
	if len(idx) == 1 {
		return "node " + idx[0]
	}
	return "nodes " + strings.Join(idx, ", ")
}

// sameEndpoint reports whether two host:port addresses name one endpoint,
// taking the loopback names as one.
func sameEndpoint(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	loop := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return ha == hb || (loop(ha) && loop(hb))
}

// hasReplica reports whether a master's INFO replication lists a replica
// at addr.
func hasReplica(info map[string]string, addr string) bool {
	for k, v := range info {
		if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "ip=") {
			continue
		}
		var ip, port string
		for f := range strings.SplitSeq(v, ",") {
			if x, ok := strings.CutPrefix(f, "ip="); ok {
				ip = x
			}
			if x, ok := strings.CutPrefix(f, "port="); ok {
				port = x
			}
		}
		if sameEndpoint(net.JoinHostPort(ip, port), addr) {
			return true
		}
	}
	return false
}

func sortedPairs(m map[[2]int]string) [][2]int {
	pairs := make([][2]int, 0, len(m))
	for p := range m {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	return pairs
}

// persistence judges appendonly and appendfsync against the restart guard
// the clients use.
func persistence(cfg doctorConfig, sp serverProbe) (string, string) {
	if sp.configErr != nil {
		return verdictSkip, fmt.Sprintf("CONFIG GET refused (%v): check appendonly and appendfsync by hand", sp.configErr)
	}
	aof, fsync := sp.config["appendonly"], sp.config["appendfsync"]
	durable := aof == "yes" && fsync == "always"
	what := "appendonly no: a restart loses this node's locks"
	switch {
	case durable:
		what = "appendonly yes, appendfsync always: locks survive a crash"
	case aof == "yes":
		what = fmt.Sprintf("appendonly yes, appendfsync %s: a crash can lose the latest locks", fsync)
	}
	switch cfg.guard.mode {
	case guardOff:
		if durable {
			return verdictWarn, what + "; with the restart guard off, a failover still loses locks"
		}
		return verdictFail, what + ", and with the restart guard off it votes again at once: keep a restarted node out for --max-ttl by hand, or turn the guard on"
	case guardPersistent:
		if durable {
			return verdictOK, what + ": the guard may trust persistence (GuardTrustPersistence)"
		}
		return verdictFail, what + ", but --restart-guard persistent trusts it: use --restart-guard on"
	}
	if durable {
		return verdictOK, what + "; --restart-guard persistent would spare restarts the recovery window"
	}
	return verdictOK, withRemedy(what, fmt.Sprintf("A node without durable persistence: after a restart, the restart guard keeps it out of locking for the max TTL recorded in its epoch record, --max-ttl (%v) when every Client uses it (check \"recovery\" says when each node votes).", cfg.guard.maxTTL))
}

// eviction judges maxmemory-policy: every lock key has a TTL, so any policy
// but noeviction, volatile-* included, can evict a held lock.
func eviction(sp serverProbe) (string, string) {
	if sp.configErr != nil {
		return verdictSkip, fmt.Sprintf("CONFIG GET refused (%v): check maxmemory-policy by hand", sp.configErr)
	}
	policy := sp.config["maxmemory-policy"]
	if policy == "noeviction" {
		return verdictOK, "maxmemory-policy noeviction"
	}
	limit := "maxmemory " + sp.config["maxmemory"]
	if sp.config["maxmemory"] == "0" {
		limit = "maxmemory 0 (no limit) for now, but the policy applies as soon as one is set"
	}
	return verdictFail, fmt.Sprintf("maxmemory-policy %s can evict held locks (every lock key has a TTL, so volatile-* policies evict them too); %s; set noeviction", policy, limit)
}

func redisVersion(sp serverProbe) (string, string) {
	v := sp.info["redis_version"]
	if v == "" {
		return verdictWarn, "INFO has no redis_version"
	}
	if versionBelow(v, minRedisVersion) {
		return verdictFail, fmt.Sprintf("Redis %s: the scripts need %d.%d.%d or later (SET NX PX, redis.set_repl)", v, minRedisVersion[0], minRedisVersion[1], minRedisVersion[2])
	}
	if sp.evalErr != nil {
		return verdictFail, fmt.Sprintf("Redis %s, but EVAL fails: %v", v, sp.evalErr)
	}
	return verdictOK, fmt.Sprintf("Redis %s, scripting works", v)
}

func versionBelow(v string, want [3]int) bool {
	var got [3]int
	for i, part := range strings.SplitN(v, ".", 3) {
		n, _ := strconv.Atoi(strings.TrimFunc(part, func(r rune) bool { return r < '0' || r > '9' }))
		got[i] = n
	}
	return slices.Compare(got[:], want[:]) < 0
}

func latency(cfg doctorConfig, sp serverProbe) (string, string) {
	t := limits.NodeTimeout(cfg.ttl)
	d := fmt.Sprintf("round trip %v; per-node timeout %v for TTL %v", round(sp.rtt), t, cfg.ttl)
	switch {
	case sp.rtt >= t:
		return verdictFail, d + ": every request would time out; raise WithNodeTimeout or the TTL"
	case sp.rtt > t/2:
		return verdictWarn, d + ": little margin; consider WithNodeTimeout"
	}
	return verdictOK, d
}

func clock(cfg doctorConfig, sp serverProbe) (string, string) {
	if sp.timeErr != nil {
		return verdictWarn, fmt.Sprintf("TIME failed: %v", sp.timeErr)
	}
	worst := sp.offset
	if worst < 0 {
		worst = -worst
	}
	worst += sp.offsetErr
	v := verdictOK
	if worst > cfg.budget() {
		v = verdictWarn
	}
	return v, fmt.Sprintf("offset %+v ±%v from this machine; drift budget %v%s", round(sp.offset), round(sp.offsetErr), cfg.budget(), clockNote(v))
}

func clockNote(v string) string {
	if v == verdictOK {
		return ""
	}
	return withRemedy("", "Clocks beyond the drift budget: keep the nodes' clocks in step (NTP); a failover or a restart from disk moves every expiry by the offset.")
}

// checkEpochDelta judges a Sentinel's down-after-milliseconds against the
// epoch guard's δ: a node re-checks its identity at most every δ, so a
// failover must take longer than δ to be noticed by the guard.
// splitBrain judges a Sentinel-managed master's min-replicas-to-write: an
// old master cut off from its sentinels but still reachable by some
// clients keeps voting, while the promoted replica votes once its recovery
// (--max-ttl) is over. With min-replicas-to-write, the old master stops
// taking writes within min-replicas-max-lag (plus the replicas' one-second
// ping) of losing its replicas, which happens at the promotion at the
// latest: that must come before the new master's recovery ends.
func splitBrain(cfg doctorConfig, sp serverProbe) (string, string) {
	if sp.info["role"] != "master" {
		return verdictSkip, sp.addr + " is not the master"
	}
	if sp.configErr != nil {
		return verdictSkip, fmt.Sprintf("CONFIG GET refused (%v): check min-replicas-to-write and min-replicas-max-lag by hand", sp.configErr)
	}
	n, _ := strconv.Atoi(sp.config["min-replicas-to-write"])
	lagS, _ := strconv.Atoi(sp.config["min-replicas-max-lag"])
	lag := time.Duration(lagS)*time.Second + time.Second
	if n < 1 {
		return verdictFail, withRemedy(fmt.Sprintf("min-replicas-to-write %d: an old master cut off from its sentinels keeps voting while the promoted replica votes too", n), "Split brain: set min-replicas-to-write 1 and min-replicas-max-lag below --max-ttl on every Sentinel-managed master.")
	}
	if lag >= cfg.guard.maxTTL {
		return verdictFail, fmt.Sprintf("min-replicas-max-lag %ds (+1s): an old master cut off from its sentinels may vote past the promoted replica's recovery (--max-ttl %v)", lagS, cfg.guard.maxTTL)
	}
	return verdictOK, fmt.Sprintf("min-replicas-to-write %d, min-replicas-max-lag %ds: a cut-off old master stops voting before the promoted replica's recovery (--max-ttl %v) ends", n, lagS, cfg.guard.maxTTL)
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

func checkEpochDelta(downAfter time.Duration) (string, string) {
	d := fmt.Sprintf("down-after-milliseconds %d; epoch guard δ %v", downAfter.Milliseconds(), limits.EpochTrust)
	if downAfter <= limits.EpochTrust {
		return verdictFail, d + ": a failover can complete before the guard notices the new master"
	}
	return verdictOK, d
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second || d <= -time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond || d <= -time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

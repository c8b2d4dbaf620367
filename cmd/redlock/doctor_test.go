package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// doctor runs "redlock doctor --json" and decodes its report. Unless args
// give --max-ttl, it gives agedMaxTTL: run it on nodes that settle made
// older than that, or they do not vote yet.
func doctor(t *testing.T, args ...string) (doctorReport, result) {
	t.Helper()
	given := false
	for _, a := range args {
		given = given || strings.HasPrefix(a, "--max-ttl")
	}
	if !given {
		args = append([]string{agedMaxTTL}, args...)
	}
	r := runCLI(t, append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor: %v: %v", err, r)
	}
	return rep, r
}

// agedMaxTTL is the --max-ttl of the doctor tests whose nodes settle
// made older than it.
const agedMaxTTL = "--max-ttl=2s"

// settle waits until every server's process has run for longer than
// agedMaxTTL, as the restart guard counts it (INFO's whole seconds, less
// one): before that, a node without an epoch record does not vote.
func settle(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	for _, s := range servers {
		rc := s.Client()
		waitFor(t, "the nodes to run for longer than "+agedMaxTTL, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			info, err := rc.Info(ctx, "server").Result()
			up, _ := strconv.Atoi(parseInfo(info)["uptime_in_seconds"])
			return err == nil && up >= 4
		})
		_ = rc.Close()
	}
}

// verdicts maps "check node" to the verdict, for the checks that ran.
func verdicts(rep doctorReport) map[string]string {
	m := map[string]string{}
	for _, c := range rep.Checks {
		m[c.Check+" "+strings.Fields(c.Node)[0]] = c.Verdict
	}
	return m
}

func TestDoctorHealthy(t *testing.T) {
	servers := redistest.Start(t, 3)
	settle(t, servers...)
	rep, r := doctor(t, "--nodes", nodesFlag(servers...))
	if r.code != exitOK || rep.Verdict == verdictFail {
		t.Fatalf("healthy deployment: %v", r)
	}
	v := verdicts(rep)
	for _, k := range []string{"nodes all", "distinct all", "replica 0", "eviction 0", "persistence 0", "version 0", "latency 2", "clock 1", "clock spread all", "sentinel all"} {
		if v[k] != verdictOK && v[k] != verdictSkip {
			t.Errorf("check %q: verdict %q", k, v[k])
		}
	}

	// The table form, and persistence judged against the restart guard.
	r = runCLI(t, "doctor", agedMaxTTL, "--restart-guard", "persistent", "--nodes", nodesFlag(servers...))
	if r.code != exitError || !strings.Contains(r.stdout, "--restart-guard persistent trusts it") || !strings.Contains(r.stdout, "verdict: FAIL") {
		t.Errorf("persistence not durable but trusted: %v", r)
	}
}

func TestDoctorMisconfigured(t *testing.T) {
	t.Run("eviction policy", func(t *testing.T) {
		good := redistest.Start(t, 2)
		lru := redistest.Start(t, 1, redistest.Options{Args: []string{"--maxmemory-policy", "volatile-lru"}})
		settle(t, append(good, lru...)...)
		rep, r := doctor(t, "--nodes", nodesFlag(good[0], good[1], lru[0]))
		if r.code != exitError || verdicts(rep)["eviction 2"] != verdictFail || verdicts(rep)["eviction 0"] != verdictOK {
			t.Errorf("volatile-lru node: %v", r)
		}
		if !strings.Contains(r.stdout, "volatile-* policies evict them too") {
			t.Errorf("no reason given: %v", r)
		}
	})
	t.Run("replica given as a node", func(t *testing.T) {
		servers := redistest.Start(t, 2)
		replica := redistest.Start(t, 1, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(servers[0].Port())}})
		settle(t, append(servers, replica...)...)
		rep, r := doctor(t, "--nodes", nodesFlag(servers[0], servers[1], replica[0]))
		if r.code != exitError || verdicts(rep)["replica 2"] != verdictFail {
			t.Fatalf("replica as node 2: %v", r)
		}
		if !strings.Contains(r.stdout, "which is node 0") {
			t.Errorf("does not name the master node: %v", r)
		}
	})
	t.Run("duplicated node", func(t *testing.T) {
		servers := redistest.Start(t, 2)
		settle(t, servers...)
		nodes := nodesFlag(servers...) + ",redis://localhost:" + strconv.Itoa(servers[1].Port())
		rep, r := doctor(t, "--nodes", nodes)
		if r.code != exitError || verdicts(rep)["distinct 1,"] != verdictFail {
			t.Errorf("node 1 given twice: %v", r)
		}
		// inspect works on it, and counts the duplicate twice.
		holdLock(t, "dup", 10*time.Second, servers...)
		ir := runCLI(t, "inspect", "--nodes", nodes, "dup")
		if ir.code != exitOK || !strings.Contains(ir.stdout, "on 3 of 3 nodes") {
			t.Errorf("inspect: %v", ir)
		}
	})
	t.Run("unreachable node and even count", func(t *testing.T) {
		servers := redistest.Start(t, 1)
		settle(t, servers...)
		rep, r := doctor(t, "--timeout", "300ms", "--nodes", nodesFlag(servers...)+",redis://"+closedAddr(t))
		v := verdicts(rep)
		if r.code != exitUnavailable || rep.Verdict != verdictNoQuorum || v["reachable 1"] != verdictFail || v["nodes all"] != verdictWarn {
			t.Errorf("one of two nodes down: %v", r)
		}
		for _, c := range rep.Checks {
			if want := "2 nodes, quorum 2: tolerates 0 failures, like 1 node, "; c.Check == "nodes" && !strings.HasPrefix(c.Detail, want) {
				t.Errorf("nodes check: %q, want it to start with %q", c.Detail, want)
			}
		}
	})
}

func TestDoctorSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel deployment")
	}
	d := redistest.StartSentinelT(t, "lockmaster")
	others := redistest.Start(t, 2)
	settle(t, append(others, d.Master)...)
	nodes := "redis-sentinel://" + strings.Join(d.SentinelAddrs(), ",") + "/lockmaster," + nodesFlag(others...)
	// Without min-replicas-to-write an old master cut off from its
	// sentinels keeps voting: a split brain.
	rep, r := doctor(t, "--nodes", nodes)
	if r.code != exitError || !hasCheck(rep, "split brain", verdictFail) {
		t.Fatalf("sentinel deployment without min-replicas-to-write: %v", r)
	}
	master := d.Master.Client()
	t.Cleanup(func() { _ = master.Close() })
	ctx := context.Background()
	for _, kv := range [][2]string{{"min-replicas-max-lag", "10"}, {"min-replicas-to-write", "1"}} {
		if err := master.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// min-replicas-max-lag 10 s needs a max TTL above 11 s: the nodes,
	// younger than that, do not vote yet, and only the checks count here.
	rep, r = doctor(t, "--max-ttl", "12s", "--nodes", nodes)
	if rep.Verdict == verdictFail || !hasCheck(rep, "split brain", verdictOK) {
		t.Fatalf("sentinel deployment: %v", r)
	}
	n := 0
	for _, c := range rep.Checks {
		if c.Check == "sentinel" {
			n++
			if c.Verdict != verdictOK || !strings.Contains(c.Detail, "down-after-milliseconds 1000") {
				t.Errorf("sentinel check: %+v", c)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d sentinel checks, want one per sentinel (3)", n)
	}
	holdLock(t, "s", 10*time.Second, append([]*redistest.Server{d.Master}, others...)...)
	if ir := runCLI(t, "inspect", "--nodes", nodes, "s"); ir.code != exitOK || !strings.Contains(ir.stdout, "on 3 of 3 nodes") {
		t.Errorf("inspect through Sentinel: %v", ir)
	}

	// Sentinels with a password of their own: the URL's sentinel_password.
	const sentinelPass = "s3ntinel-secret"
	for _, addr := range d.SentinelAddrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		err := sc.Process(ctx, redis.NewStatusCmd(ctx, "acl", "setuser", "default", "on", ">"+sentinelPass))
		_ = sc.Close()
		if err != nil {
			t.Fatalf("sentinel %s: ACL SETUSER: %v", addr, err)
		}
	}
	if ir := runCLI(t, "inspect", "--nodes", nodes, "s"); !strings.Contains(ir.stdout, "NOAUTH") || strings.Contains(ir.stdout, "on 3 of 3 nodes") {
		t.Errorf("inspect through password-protected sentinels without their password: %v", ir)
	}
	authed := "redis-sentinel://" + strings.Join(d.SentinelAddrs(), ",") + "/lockmaster?sentinel_password=" + sentinelPass + "," + nodesFlag(others...)
	ir := runCLI(t, "inspect", "--nodes", authed, "s")
	if ir.code != exitOK || !strings.Contains(ir.stdout, "on 3 of 3 nodes") {
		t.Errorf("inspect with the sentinels' password: %v", ir)
	}
	rep, r = doctor(t, "--nodes", authed)
	for _, c := range rep.Checks {
		if c.Check == "sentinel" && c.Verdict != verdictOK {
			t.Errorf("doctor with the sentinels' password: %+v (%v)", c, r)
		}
	}
	for _, out := range []string{ir.stdout, ir.stderr, r.stdout, r.stderr} {
		if strings.Contains(out, sentinelPass) {
			t.Errorf("the sentinels' password shows in the output: %q", out)
		}
	}
}

// hasCheck reports whether the report has a check of that name with that
// verdict.
func hasCheck(rep doctorReport, name, verdict string) bool {
	for _, c := range rep.Checks {
		if c.Check == name && c.Verdict == verdict {
			return true
		}
	}
	return false
}

func TestCheckEpochDelta(t *testing.T) {
	for _, tt := range []struct {
		downAfter time.Duration
		want      string
	}{{30 * time.Second, verdictOK}, {51 * time.Millisecond, verdictOK}, {limits.EpochTrust, verdictFail}, {10 * time.Millisecond, verdictFail}} {
		if v, d := checkEpochDelta(tt.downAfter); v != tt.want {
			t.Errorf("down-after %v: %s (%s), want %s", tt.downAfter, v, d, tt.want)
		}
	}
}

func TestVersionBelow(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"2.6.12", true}, {"4.0.14", true}, {"5.0.0", false}, {"7.0.15", false}, {"2.4", true}, {"255.255.255", false}, {"6.2.0-rc1", false}} {
		if got := versionBelow(tt.v, minRedisVersion); got != tt.want {
			t.Errorf("versionBelow(%q) = %v", tt.v, got)
		}
	}
}

func TestClusterNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartClusterT(t, 3)
	others := redistest.Start(t, 2)
	settle(t, others...)
	addrs := make([]string, len(cl.Servers))
	for i, s := range cl.Servers {
		addrs[i] = s.Addr()
	}
	nodes := "redis-cluster://" + strings.Join(addrs, ",") + "," + nodesFlag(others...)

	rep, r := doctor(t, "--nodes", nodes)
	if r.code != exitOK {
		t.Fatalf("cluster node: %v", r)
	}
	for _, c := range rep.Checks {
		if c.Node == "0 cluster ("+strings.Join(addrs, ",")+")" && c.Check == "version" && c.Verdict != verdictOK {
			t.Errorf("cluster version check: %+v", c)
		}
	}
	r = runCLI(t, "run", noGuard, wait, "--nodes", nodes, "c", "--", "sh", "-c", "exit 5")
	if r.code != 5 {
		t.Errorf("run with a cluster node: %v", r)
	}
	holdLock(t, "c", 10*time.Second, others...)
	if ir := runCLI(t, "inspect", "--nodes", nodes, "c"); ir.code != exitOK || !strings.Contains(ir.stdout, "on 2 of 3 nodes") {
		t.Errorf("inspect with a cluster node: %v", ir)
	}
}

func TestSplitBrain(t *testing.T) {
	cfg := doctorConfig{guard: guardFlags{maxTTL: time.Minute, mode: guardOn}}
	probe := func(role, n, lag string) serverProbe {
		return serverProbe{addr: "m", info: map[string]string{"role": role},
			config: map[string]string{"min-replicas-to-write": n, "min-replicas-max-lag": lag}}
	}
	for _, tt := range []struct {
		sp   serverProbe
		want string
	}{
		{probe("master", "1", "10"), verdictOK},
		{probe("master", "0", "10"), verdictFail},
		{probe("master", "1", "59"), verdictFail}, // 59 s + the 1 s ping reach the recovery's end
		{probe("master", "1", "58"), verdictOK},
		{probe("slave", "0", "10"), verdictSkip},
		{serverProbe{addr: "m", info: map[string]string{"role": "master"}, configErr: errors.New("NOPERM")}, verdictSkip},
	} {
		if v, d := splitBrain(cfg, tt.sp); v != tt.want {
			t.Errorf("%+v: %s (%s), want %s", tt.sp.config, v, d, tt.want)
		}
	}
}

// A Cluster master promoted during its process's life makes every new lock
// name recover on first use: doctor says so.
func TestDoctorReportsPromotedClusterMaster(t *testing.T) {
	cfg := doctorConfig{ttl: 10 * time.Second, drift: limits.DriftFactor, guard: guardFlags{maxTTL: time.Minute, mode: guardOn}}
	node := func(replid2 string) nodeProbe {
		return nodeProbe{spec: &nodeSpec{kind: cluster, label: "c"}, servers: []serverProbe{
			{addr: "a", info: map[string]string{"role": "master", "master_replid2": "0000000000000000000000000000000000000000"}},
			{addr: "b", info: map[string]string{"role": "master", "master_replid2": replid2}},
		}}
	}
	if rep := (doctorReport{Checks: diagnose(cfg, []nodeProbe{node("0000000000000000000000000000000000000000")})}); !hasCheck(rep, "promoted", verdictOK) {
		t.Errorf("never promoted: %+v", rep.Checks)
	}
	rep := doctorReport{Checks: diagnose(cfg, []nodeProbe{node("8c5b6a1f9e0d4c3b2a1908f7e6d5c4b3a2918070")})}
	if !hasCheck(rep, "promoted", verdictWarn) {
		t.Errorf("a promoted master: %+v", rep.Checks)
	}
}

// TestDoctorQuorum: doctor tells a set where a quorum votes but not every
// node (DEGRADED, exit 1) from one where no quorum votes (NO QUORUM, exit
// 69), in the text, the exit status and the JSON, whose rows give a
// node's index and address apart (C5 of issue 49); says each long remedy
// once (C8); and says when fresh nodes will vote (C2).
func TestDoctorQuorum(t *testing.T) {
	servers := redistest.Start(t, 2)
	settle(t, servers...)
	down := closedAddr(t)
	degraded := nodesFlag(servers...) + ",redis://" + down
	rep, r := doctor(t, "--timeout", "300ms", "--nodes", degraded)
	if r.code != exitError || rep.Verdict != verdictDegraded || len(rep.Quorum) != 1 || rep.Quorum[0].State != "degraded" || rep.Quorum[0].Voting != 2 {
		t.Errorf("one node of three down: want exit 1, DEGRADED: %v", r)
	}
	for _, c := range rep.Checks {
		if c.Check == "reachable" && c.Node == "2 "+down && (c.Index == nil || *c.Index != 2 || c.Address != down) {
			t.Errorf("reachable row of node 2: index %v, address %q, want 2 and %q", c.Index, c.Address, down)
		}
		if c.Check == "nodes" && c.Index != nil {
			t.Errorf("the row of all nodes has index %d", *c.Index)
		}
	}
	tr := runCLI(t, "doctor", agedMaxTTL, "--timeout", "300ms", "--nodes", degraded)
	if tr.code != exitError || !strings.Contains(tr.stdout, "verdict: DEGRADED") || !strings.Contains(tr.stdout, "quorum: 2 of 3 nodes vote, 2 needed (not voting: node 2): degraded, locks can be taken") {
		t.Errorf("table, one node of three down: %v", tr)
	}
	// Each long remedy is said once, however many rows need it.
	if n := strings.Count(tr.stdout, "after a restart, the restart guard keeps it out"); n != 1 || !strings.Contains(tr.stdout, "[remedy 1]") {
		t.Errorf("the persistence remedy is said %d times, want once:\n%s", n, tr.stdout)
	}

	all := "redis://" + closedAddr(t) + ",redis://" + closedAddr(t) + ",redis://" + down
	rep, r = doctor(t, "--timeout", "300ms", "--nodes", all)
	if r.code != exitUnavailable || rep.Verdict != verdictNoQuorum || rep.Quorum[0].State != "none" {
		t.Errorf("every node down: want exit %d, NO QUORUM: %v", exitUnavailable, r)
	}

	// Nodes just started, and the default max TTL: none votes yet, and
	// doctor says from when a quorum will.
	fresh := redistest.Start(t, 3)
	rep, r = doctor(t, "--max-ttl", "1m", "--nodes", nodesFlag(fresh...))
	if r.code != exitUnavailable || rep.Verdict != verdictNoQuorum || rep.Quorum[0].From == "" {
		t.Errorf("fresh nodes: want NO QUORUM with the time a quorum votes: %v", r)
	}
	for _, c := range rep.Checks {
		if c.Check == "recovery" && (c.Verdict != verdictWarn || !strings.Contains(c.Detail, "refuses every lock until")) {
			t.Errorf("recovery of a fresh node: %+v", c)
		}
	}
	tr = runCLI(t, "doctor", "--max-ttl", "1m", "--nodes", nodesFlag(fresh...))
	if !strings.Contains(tr.stdout, "no lock can be taken until 20") || !strings.Contains(tr.stdout, "verdict: NO QUORUM") {
		t.Errorf("table, fresh nodes: %v", tr)
	}
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverProbe is what one redis-server said about itself.
type serverProbe struct {
	addr      string
	err       error // not reachable
	info      map[string]string
	config    map[string]string
	configErr error
	evalErr   error
	rtt       time.Duration // median PING round trip
	offset    time.Duration // node clock − local clock
	offsetErr time.Duration // ± uncertainty of offset
	timeErr   error
}

// nodeProbe is what one node (standalone, Sentinel-managed, cluster) said.
type nodeProbe struct {
	spec    *nodeSpec
	err     error
	servers []serverProbe
	// downAfter holds each sentinel's down-after-milliseconds for the
	// master, or the error asking it.
	downAfter []sentinelAnswer
	// epoch is the node's epoch record (readEpochs), for "recovery".
	epoch nodeEpoch
}

// up returns the servers of the node that answered.
func (p nodeProbe) up() []serverProbe {
	var s []serverProbe
	for _, sp := range p.servers {
		if sp.err == nil {
			s = append(s, sp)
		}
	}
	return s
}

type sentinelAnswer struct {
	addr      string
	downAfter time.Duration
	err       error
}

func probeAll(ctx context.Context, conns []conn, timeout time.Duration) []nodeProbe {
	probes := make([]nodeProbe, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { probes[i] = probeNode(ctx, c, timeout) })
	}
	wg.Wait()
	return probes
}

func probeNode(ctx context.Context, c conn, timeout time.Duration) nodeProbe {
	p := nodeProbe{spec: c.spec}
	switch rc := c.rc.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		cctx, cancel := context.WithTimeout(ctx, 4*timeout)
		err := rc.ForEachShard(cctx, func(ctx context.Context, sc *redis.Client) error {
			sp := probeServer(ctx, sc, timeout)
			mu.Lock()
			p.servers = append(p.servers, sp)
			mu.Unlock()
			return nil
		})
		cancel()
		if err != nil {
			p.err = err
		}
		slices.SortFunc(p.servers, func(a, b serverProbe) int { return strings.Compare(a.addr, b.addr) })
	case *redis.Client:
		sp := probeServer(ctx, rc, timeout)
		p.err = sp.err
		p.servers = []serverProbe{sp}
	}
	if c.spec.kind == sentinel {
		for i, addr := range c.spec.addrs {
			sc := c.spec.sentinelClient(i, timeout)
			sctx, cancel := context.WithTimeout(ctx, timeout)
			m, err := sc.Master(sctx, c.spec.master).Result()
			cancel()
			_ = sc.Close()
			a := sentinelAnswer{addr: addr, err: err}
			if err == nil {
				ms, perr := strconv.Atoi(m["down-after-milliseconds"])
				a.downAfter, a.err = time.Duration(ms)*time.Millisecond, perr
			}
			p.downAfter = append(p.downAfter, a)
		}
	}
	return p
}

func probeServer(ctx context.Context, rc *redis.Client, timeout time.Duration) serverProbe {
	sp := serverProbe{addr: rc.Options().Addr}
	call := func(f func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f(cctx)
	}
	var rtts []time.Duration
	for range 5 {
		t0 := time.Now()
		if err := call(func(ctx context.Context) error { return rc.Ping(ctx).Err() }); err != nil {
			sp.err = nodeErr(explainTLS(ctx, tlsAddrsOf(rc.Options()), err, timeout))
			return sp
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	sp.rtt = rtts[len(rtts)/2]

	sp.info = map[string]string{}
	for _, section := range []string{"server", "replication"} {
		var s string
		err := call(func(ctx context.Context) (err error) { s, err = rc.Info(ctx, section).Result(); return err })
		if err != nil {
			sp.err = fmt.Errorf("INFO %s: %w", section, nodeErr(err))
			return sp
		}
		for k, v := range parseInfo(s) {
			sp.info[k] = v
		}
	}
	if sp.addr == "FailoverClient" {
		sp.addr = "master"
		var ci string
		if call(func(ctx context.Context) (err error) { ci, err = rc.Do(ctx, "CLIENT", "INFO").Text(); return err }) == nil {
			for f := range strings.FieldsSeq(ci) {
				if v, ok := strings.CutPrefix(f, "laddr="); ok {
					sp.addr = v
				}
			}
		}
	}

	sp.config = map[string]string{}
	for _, param := range []string{"appendonly", "appendfsync", "maxmemory-policy", "maxmemory", "min-replicas-to-write", "min-replicas-max-lag"} {
		var m map[string]string
		err := call(func(ctx context.Context) (err error) { m, err = rc.ConfigGet(ctx, param).Result(); return err })
		if err != nil {
			sp.configErr = nodeErr(err)
			break
		}
		sp.config[param] = m[param]
	}
	sp.evalErr = call(func(ctx context.Context) error { return rc.Eval(ctx, "return 1", nil).Err() })

	// The TIME sample with the shortest round trip bounds the offset best.
	best := time.Duration(-1)
	for range 3 {
		var node time.Time
		t0 := time.Now()
		err := call(func(ctx context.Context) (err error) { node, err = rc.Time(ctx).Result(); return err })
		rtt := time.Since(t0)
		if err != nil {
			sp.timeErr = nodeErr(err)
			continue
		}
		if best < 0 || rtt < best {
			best = rtt
			sp.offset = node.Sub(t0.Add(rtt / 2))
			sp.offsetErr = rtt / 2
			sp.timeErr = nil
		}
	}
	return sp
}

func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

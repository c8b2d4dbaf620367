package redlock

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/adaptive"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/nodelog"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/reply"
	"github.com/redlock-go/redlock/internal/sampler"
)

// The adaptive TTL's sampler (WithAdaptiveTTL): a goroutine of the Client
// that reads INFO from every node every AdaptiveTTL.SampleInterval, to
// measure round trips when no lock is taken and to report memory pressure,
// and counts the Clients waiting for its names. It feeds the policy
// (internal/adaptive) and reports SampleEvents; it never shortens a TTL.

// sampling is the part of the engine that samples the nodes: its
// goroutine, its memory of the nodes, and the policy it feeds.
type sampling struct {
	w     *wiring
	adapt *adaptive.Policy
	loop  loop
	nodes sampler.State
}

const (
	// sampleTimeout bounds one node's INFO in the sampler.
	sampleTimeout = time.Second
	// maxSubNames bounds the names whose waiting Clients one sample counts
	// (PUBSUB NUMSUB).
	maxSubNames = 128
)

// start starts the sampler, once, unless the Client is closed. The
// caller holds the engine's life for reading.
func (sm *sampling) start() {
	sm.loop.start(&sm.w.bg, sm.w.cfg.adaptive.SampleInterval, true, sm.sample)
}

// sample reads every node's memory, records the round trips, and reports
// the sample to the hook and any pressure to the logger.
func (sm *sampling) sample(ctx context.Context) {
	samples := make([]SampleEvent, len(sm.w.nodes))
	var wg sync.WaitGroup
	for i, n := range sm.w.nodes {
		wg.Go(func() {
			samples[i] = sm.readNode(ctx, n)
		})
	}
	wg.Wait()
	sm.sampleWaiters(ctx)
	if ctx.Err() != nil {
		return
	}
	now := sm.w.cfg.now()
	rtt := sm.adapt.RTTP95(now)
	for i := range samples {
		m := &samples[i]
		m.RTT = rtt
		if m.Err != nil {
			continue
		}
		// readNode puts the node's total here: 0 at the first sample, or
		// for a restarted node.
		m.Evicted = sm.nodes.Evictions(i, m.Evicted)
		m.Pressure = pressure(m, sm.w.cfg.adaptive.MemoryRatio)
	}
	if l := sm.w.cfg.logger; l != nil {
		for _, m := range samples {
			if m.Err != nil && sm.w.log.limit.Due(m.Node, nodelog.SampleErr, now) {
				l.LogAttrs(ctx, slog.LevelWarn, "redlock: adaptive TTL cannot read the node's memory (INFO): its memory pressure is unknown",
					slog.Int("node", m.Node), slog.String("addr", m.Addr), slog.String("error", m.Err.Error()))
			}
			if m.Pressure == "" || !sm.w.log.limit.Due(m.Node, nodelog.Memory, now) {
				continue
			}
			l.LogAttrs(ctx, slog.LevelWarn, "redlock: node under memory pressure: lock keys can be evicted or refused (the adaptive TTL does not shorten TTLs for it)",
				slog.Int("node", m.Node), slog.String("addr", m.Addr), slog.String("pressure", m.Pressure),
				slog.Int64("used_memory", m.UsedMemory), slog.Int64("maxmemory", m.MaxMemory), slog.String("policy", m.Policy))
		}
	}
	for _, m := range samples {
		sm.w.cfg.emit(ctx, m)
	}
}

// sampleWaiters counts, on every node that is not a Redis Cluster, the
// Clients subscribed to the release channels of up to maxSubNames names:
// this Client's held locks with an adaptive TTL and the names it was
// refused. A Client subscribes once per name and node while it has
// waiters, so the highest count over the nodes is the number of Clients
// waiting.
func (sm *sampling) sampleWaiters(ctx context.Context) {
	names := make(map[string]string, maxSubNames) // channel → lock key
	sm.w.reg.mu.Lock()
	held := sm.w.reg.held
	// From a random place: another subset each time when there are more.
	from := 0
	if len(held) > 0 {
		from = rand.IntN(len(held))
	}
	for i := range held {
		if len(names) >= maxSubNames {
			break
		}
		l := held[(from+i)%len(held)]
		l.mu.Lock()
		if l.base > 0 {
			names[keys.Channel(l.keys.key)] = l.keys.key
		}
		l.mu.Unlock()
	}
	sm.w.reg.mu.Unlock()
	for _, k := range sm.adapt.Contended(maxSubNames - len(names)) {
		names[keys.Channel(k)] = k
	}
	channels := make([]any, 0, 2+len(names))
	channels = append(channels, "PUBSUB", "NUMSUB")
	for ch := range names {
		channels = append(channels, ch)
	}
	counts := make(map[string]int64, len(names))
	if len(names) > 0 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range sm.w.nodes {
			if n.Cluster {
				continue // sharded channels live on their slot's shard: not counted
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
				defer cancel()
				subs, err := reply.Slice(n.Conn.Do(ctx, channels...))
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i := 0; i+1 < len(subs); i += 2 {
					ch, _ := subs[i].(string)
					c, _ := subs[i+1].(int64)
					if k, ok := names[ch]; ok {
						counts[k] = max(counts[k], c)
					}
				}
			})
		}
		wg.Wait()
	}
	sm.adapt.SetWaiting(counts, sm.w.cfg.now())
}

// pressure says what is wrong with a node's memory, or "" when nothing is
// (sampler.Pressure).
func pressure(m *SampleEvent, ratio float64) string {
	return sampler.Pressure(memoryOf(*m), ratio)
}

// memoryOf is a sample's memory.
func memoryOf(m SampleEvent) sampler.Memory {
	return sampler.Memory{Used: m.UsedMemory, Max: m.MaxMemory, Policy: m.Policy, Evicted: m.Evicted}
}

// parseMemory reads a node's memory from INFO's text (sampler.Parse),
// with evicted_keys in Evicted.
func parseMemory(info string) SampleEvent {
	m := sampler.Parse(info)
	return SampleEvent{UsedMemory: m.Used, MaxMemory: m.Max, Policy: m.Policy, Evicted: m.Evicted}
}

// readNode reads one node's memory; its Evicted is the node's total
// evicted_keys, which sample turns into a difference. On a Redis Cluster
// it reads every master, and reports the fullest and the sum of
// evictions.
func (sm *sampling) readNode(ctx context.Context, n *quorum.Node) SampleEvent {
	m := SampleEvent{Node: n.Index, Addr: n.Addr}
	read := func(ctx context.Context, c driver.Node) (SampleEvent, error) {
		ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
		defer cancel()
		start := sm.w.cfg.now()
		replies, err := c.Pipe(ctx, [][]any{{"INFO", "memory"}, {"INFO", "stats"}})
		if err != nil {
			return SampleEvent{}, err
		}
		var info strings.Builder
		for _, r := range replies {
			s, err := reply.String(r.Val, r.Err)
			if err != nil {
				return SampleEvent{}, err
			}
			info.WriteString(s)
		}
		if sm.nodes.Warm(n.Index) {
			now := sm.w.cfg.now()
			sm.adapt.AddRTT(now, now.Sub(start))
		}
		return parseMemory(info.String()), nil
	}
	masters, err := n.Conn.Masters(ctx)
	if err != nil {
		m.Err = err
		return m
	}
	if masters == nil {
		s, err := read(ctx, n.Conn)
		if err != nil {
			m.Err = err
			return m
		}
		m.UsedMemory, m.MaxMemory, m.Policy, m.Evicted = s.UsedMemory, s.MaxMemory, s.Policy, s.Evicted
		return m
	}
	for _, c := range masters {
		s, err := read(ctx, c)
		if err != nil {
			return SampleEvent{Node: n.Index, Addr: n.Addr, Err: err}
		}
		ev := m.Evicted + s.Evicted
		if m.Policy == "" || sampler.Fuller(memoryOf(s), memoryOf(m)) {
			m.UsedMemory, m.MaxMemory, m.Policy = s.UsedMemory, s.MaxMemory, s.Policy
		}
		m.Evicted = ev
	}
	return m
}

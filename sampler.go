package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/reply"
)

// The adaptive TTL's sampler (WithAdaptiveTTL): a goroutine of the Client
// that reads INFO from every node every AdaptiveTTL.SampleInterval, to
// measure round trips when no lock is taken and to report memory pressure,
// and counts the Clients waiting for its names. It feeds the policy
// (internal/adaptive) and reports SampleEvents; it never shortens a TTL.

const (
	// sampleTimeout bounds one node's INFO in the sampler.
	sampleTimeout = time.Second
	// maxSubNames bounds the names whose waiting Clients one sample counts
	// (PUBSUB NUMSUB).
	maxSubNames = 128
)

// startSampler starts the sampler, once, unless the Client is closed. The
// caller holds e.life for reading.
func (e *engine) startSampler() {
	e.sampler.loop.start(&e.bg, e.cfg.adaptive.SampleInterval, true, e.sample)
}

// sample reads every node's memory, records the round trips, and reports
// the sample to the hook and any pressure to the logger.
func (e *engine) sample(ctx context.Context) {
	samples := make([]SampleEvent, len(e.nodes))
	var wg sync.WaitGroup
	for i, n := range e.nodes {
		wg.Go(func() {
			samples[i] = e.readNode(ctx, n)
		})
	}
	wg.Wait()
	e.sampleWaiters(ctx)
	if ctx.Err() != nil {
		return
	}
	now := e.cfg.now()
	rtt := e.adapt.RTTP95(now)
	s := &e.sampler
	s.mu.Lock()
	for i := range samples {
		m := &samples[i]
		m.RTT = rtt
		if m.Err != nil {
			continue
		}
		total := m.Evicted // readNode puts the node's total here
		if prev := s.evicted[i]; prev >= 0 && total >= prev {
			m.Evicted = total - prev
		} else {
			m.Evicted = 0 // first sample, or a restarted node
		}
		s.evicted[i] = total
		m.Pressure = pressure(m, e.cfg.adaptive.MemoryRatio)
	}
	s.mu.Unlock()
	if l := e.cfg.logger; l != nil {
		for _, m := range samples {
			if m.Err != nil && e.nodeLog.due(m.Node, logSampleErr, now) {
				l.LogAttrs(ctx, slog.LevelWarn, "redlock: adaptive TTL cannot read the node's memory (INFO): its memory pressure is unknown",
					slog.Int("node", m.Node), slog.String("addr", m.Addr), slog.String("error", m.Err.Error()))
			}
			if m.Pressure == "" || !e.nodeLog.due(m.Node, logMemory, now) {
				continue
			}
			l.LogAttrs(ctx, slog.LevelWarn, "redlock: node under memory pressure: lock keys can be evicted or refused (the adaptive TTL does not shorten TTLs for it)",
				slog.Int("node", m.Node), slog.String("addr", m.Addr), slog.String("pressure", m.Pressure),
				slog.Int64("used_memory", m.UsedMemory), slog.Int64("maxmemory", m.MaxMemory), slog.String("policy", m.Policy))
		}
	}
	for _, m := range samples {
		e.emit(ctx, m)
	}
}

// sampleWaiters counts, on every node that is not a Redis Cluster, the
// Clients subscribed to the release channels of up to maxSubNames names:
// this Client's held locks with an adaptive TTL and the names it was
// refused. A Client subscribes once per name and node while it has
// waiters, so the highest count over the nodes is the number of Clients
// waiting.
func (e *engine) sampleWaiters(ctx context.Context) {
	names := make(map[string]string, maxSubNames) // channel → lock key
	e.mu.Lock()
	for h := range e.held { // map order: another subset each time when there are more
		if len(names) >= maxSubNames {
			break
		}
		if l, ok := h.(*Lock); ok {
			l.mu.Lock()
			if l.base > 0 {
				names[keys.Channel(l.keys.key)] = l.keys.key
			}
			l.mu.Unlock()
		}
	}
	e.mu.Unlock()
	for _, k := range e.adapt.Contended(maxSubNames - len(names)) {
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
		for _, n := range e.nodes {
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
	e.adapt.SetWaiting(counts, e.cfg.now())
}

// pressure says what is wrong with a node's memory, or "" when nothing is.
func pressure(m *SampleEvent, ratio float64) string {
	var why []string
	if m.Evicted > 0 {
		why = append(why, fmt.Sprintf("%d keys evicted since the last sample (maxmemory-policy %s): a lock key may be among them", m.Evicted, m.Policy))
	}
	if m.MaxMemory > 0 && float64(m.UsedMemory) >= ratio*float64(m.MaxMemory) {
		effect := "keys will be evicted"
		if m.Policy == "noeviction" {
			effect = "writes, acquires included, will be refused"
		}
		why = append(why, fmt.Sprintf("used_memory %d is %.0f%% of maxmemory %d (maxmemory-policy %s): %s",
			m.UsedMemory, 100*float64(m.UsedMemory)/float64(m.MaxMemory), m.MaxMemory, m.Policy, effect))
	}
	return strings.Join(why, "; ")
}

// readNode reads one node's memory; its Evicted is the node's total
// evicted_keys, which sample turns into a difference. On a Redis Cluster
// it reads every master, and reports the fullest and the sum of
// evictions.
func (e *engine) readNode(ctx context.Context, n *quorum.Node) SampleEvent {
	m := SampleEvent{Node: n.Index, Addr: n.Addr}
	read := func(ctx context.Context, c driver.Node) (SampleEvent, error) {
		ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
		defer cancel()
		start := e.cfg.now()
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
		s := &e.sampler
		s.mu.Lock()
		if s.warm[n.Index] {
			now := e.cfg.now()
			e.adapt.AddRTT(now, now.Sub(start))
		}
		s.warm[n.Index] = true
		s.mu.Unlock()
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
		if m.Policy == "" || fuller(s, m) {
			m.UsedMemory, m.MaxMemory, m.Policy = s.UsedMemory, s.MaxMemory, s.Policy
		}
		m.Evicted = ev
	}
	return m
}

// fuller reports whether x is closer to its maxmemory than y.
func fuller(x, y SampleEvent) bool {
	ratio := func(m SampleEvent) float64 {
		if m.MaxMemory <= 0 {
			return 0
		}
		return float64(m.UsedMemory) / float64(m.MaxMemory)
	}
	return ratio(x) > ratio(y)
}

// parseMemory reads used_memory, maxmemory, maxmemory_policy and
// evicted_keys (into Evicted) from INFO's text.
func parseMemory(info string) SampleEvent {
	var m SampleEvent
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			m.UsedMemory, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			m.MaxMemory, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			m.Policy = v
		case "evicted_keys":
			m.Evicted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

// Package redlockotel traces and measures what a redlock Client does with
// OpenTelemetry. It lives in a module of its own, so that the redlock module
// does not depend on OpenTelemetry.
//
//	hook, err := redlockotel.New(
//		redlockotel.WithTracerProvider(tp), // default otel.GetTracerProvider()
//		redlockotel.WithMeterProvider(mp),  // default otel.GetMeterProvider()
//	)
//	if err != nil { ... }
//	c, err := redlock.New(nodes, redlock.WithHook(hook))
//
// # Spans
//
// A Hook sees each operation when it has ended, with its duration, so each
// span is made after the fact with the operation's start and end times:
//
//	redlock.obtain   one call of Obtain, TryObtain or Do's obtain
//	redlock.refresh  one refresh, manual or automatic
//	redlock.release  one Release (of zero length: the event has no duration)
//	redlock.lost     the loss of a held lock (of zero length)
//
// Each span is a child of the span in the context of the call it belongs
// to (Obtain's, Refresh's, Release's; Do's for the automatic refreshes and
// the loss of Do's lock). Without one, it is a child of the span given to
// WithParent, or a root span.
//
// Span attributes: redlock.outcome (the values below), redlock.kind (the
// lock's kind, the events' Kind: "plain" (Client.Obtain, Mutex, All, Any),
// "reentrant" (Reentrant), "write" and "read" (the writer and the reader of
// RWMutex) or "permit" (a Semaphore's)), redlock.attempts,
// redlock.token and redlock.degraded (of an obtained lock: true when it came
// from the degraded mode's lease store), redlock.nodes and redlock.quorum (of
// an obtain, from its attempts; of a failed refresh or release, the quorum
// and redlock.agreed), redlock.auto (refresh), redlock.held_ms (release,
// lost), redlock.ttl_ms and redlock.ttl.reason (obtain, refresh: the TTL
// asked of the nodes and why, redlock.ObtainEvent.TTLReason). Lock names
// are attributes (redlock.key) only with WithKeyAttribute.
// A span whose operation failed has status Error with the error's message.
//
// An obtain span has an event per attempt ("redlock.attempt": its number,
// outcome, whether it took a second round), per wait between attempts
// ("redlock.wait": what ended it and how long it took), and per node of
// each attempt ("redlock.node": redlock.attempt, redlock.node (the node's
// index), redlock.node.addr, redlock.node.outcome ("agreed" or the reason of
// its refusal, redlock.NodeResult.Reason) and redlock.node.latency_ms), at
// the time the node answered.
// A failed refresh or release has a "redlock.node" event per node that did
// not agree. The attempts and waits are matched to their obtain by the
// events' ObtainID.
//
// # Metrics
//
//	redlock.obtain.duration   histogram, s: redlock.outcome, redlock.kind
//	redlock.attempts          counter: redlock.outcome, redlock.kind
//	redlock.wait.duration     histogram, s: redlock.woken_by
//	redlock.hold.duration     histogram, s: redlock.outcome ("released" or "lost"), redlock.kind, once per lock
//	redlock.refresh.duration  histogram, s: redlock.outcome, redlock.auto, redlock.kind
//	redlock.releases          counter: redlock.outcome, redlock.kind
//	redlock.lost              counter: redlock.kind
//	redlock.node.errors       counter: redlock.op, redlock.node, redlock.node.error_kind
//	redlock.locks.held        up-down counter: redlock.kind; locks obtained and neither released nor lost
//	redlock.breaker.state     gauge: the circuit breaker, 0 closed, 1 open, 2 half-open (redlock.Client.BreakerState)
//	redlock.breaker.transitions counter: redlock.breaker.state, the state entered ("closed", "open", "half_open")
//	redlock.locks.degraded    up-down counter: degraded locks (from redlock.WithDegradedMode's lease store) held
//	redlock.ttl.chosen        histogram, s: redlock.op ("obtain", "refresh"), redlock.ttl.reason; each lock obtained and successful refresh
//
// With redlock.WithAdaptiveTTL, from its sampler (redlock.SampleEvent):
//
//	redlock.rtt.p95                 gauge, s: the nodes' round-trip time (p95) the adaptive TTL uses
//	redlock.node.memory.used_ratio  gauge: redlock.node; used_memory / maxmemory (0: no maxmemory)
//	redlock.node.memory.pressure    gauge: redlock.node; 1 while the node evicts keys or is near maxmemory
//	redlock.node.evicted_keys       counter: redlock.node; keys the node evicted
//
// Outcomes: of an obtain, "obtained", "held" (contention), "no_quorum",
// "breaker_open" (the circuit breaker was open), "canceled" (the context
// ended), "closed", "error"; of an attempt,
// "obtained", "held", "no_quorum", "error"; of a refresh, "ok",
// "not_held", "closed", "failed"; of a release, "ok", "not_held",
// "failed". Node error kinds (redlock.NodeResult.Reason): "held",
// "not_owner", "wrong_kind", "recovering", "timeout", "pending", "skipped",
// "not_replicated", "error". The redlockprom package documents them.
//
// redlock.locks.held, redlock.locks.degraded and redlock.hold.duration
// follow each lock by its LockID: a lock counts from its ObtainEvent to its
// LostEvent or its ReleaseEvent, whichever comes first.
//
// Metrics never carry lock names; WithLockAttribute adds a redlock.lock
// attribute from a function that maps names to a small fixed set.
package redlockotel

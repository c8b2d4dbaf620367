// Package redlockprom exports the events of a redlock Client as Prometheus
// metrics. It lives in a module of its own, so that the redlock module does
// not depend on Prometheus.
//
//	reg := prometheus.NewRegistry()
//	hook, err := redlockprom.New(reg)
//	if err != nil { ... }
//	c, err := redlock.New(nodes, redlock.WithHook(hook))
//
// New registers on the Registerer it is given and nowhere else: never on the
// global registry. One Hook may be installed on several Clients; give each
// Hook registered on one registry distinct WithConstLabels.
//
// # Metrics
//
//	redlock_acquire_total{result,lock_kind}            counter: calls of Obtain, TryObtain and Do's obtain
//	redlock_acquire_duration_seconds{result,lock_kind} histogram: their duration, waits included
//	redlock_attempts_total{result,lock_kind}           counter: acquire rounds (an Obtain makes one or more)
//	redlock_wait_duration_seconds{woken_by}            histogram: waits between attempts
//	redlock_hold_duration_seconds{outcome,lock_kind}   histogram: how long each lock was held, once per lock
//	redlock_refresh_total{result,auto,lock_kind}       counter: refreshes, manual and automatic
//	redlock_refresh_duration_seconds{auto,lock_kind}   histogram: their duration
//	redlock_release_total{result,lock_kind}            counter: releases
//	redlock_lost_total{lock_kind}                      counter: locks lost while held
//	redlock_node_errors_total{op,node,kind}            counter: a node's refusal or failure in a round
//	redlock_held_locks{lock_kind}                      gauge: locks obtained and neither released nor lost
//	redlock_breaker_state                              gauge: the circuit breaker: 0 closed, 1 open, 2 half-open
//	redlock_breaker_transitions_total{to}              counter: changes of the breaker's state, by state entered
//	redlock_degraded_locks                             gauge: degraded locks (from the lease store) held
//
// With redlock.WithAdaptiveTTL (docs/adaptive-ttl.md in the repository):
//
//	redlock_ttl_chosen_seconds{op,reason}              histogram: TTL of each lock obtained and each successful refresh
//	redlock_rtt_p95_seconds                            gauge: the nodes' round-trip time (p95) the adaptive TTL uses
//	redlock_node_memory_used_ratio{node}               gauge: used_memory / maxmemory (0: no maxmemory)
//	redlock_node_memory_pressure{node}                 gauge: 1 while the node evicts keys or is near maxmemory
//	redlock_node_evicted_keys_total{node}              counter: keys the node evicted
//
// ttl_chosen_seconds is recorded without WithAdaptiveTTL too, with reason
// "given". The other four come from the adaptive TTL's sampler
// (redlock.SampleEvent) and exist only on a Client that has one.
//
// Label values, all from small fixed sets:
//
//   - lock_kind, on every metric but wait_duration_seconds and
//     node_errors_total: the lock's kind, the events' Kind: "plain"
//     (Client.Obtain, Mutex, All, Any), "reentrant" (Reentrant), "write"
//     and "read" (the writer and the reader of RWMutex), "permit" (a
//     Semaphore's). Without WithLockLabel, lost_total and held_locks show a
//     series at 0 for each of the five from the start.
//   - result of acquire_total and acquire_duration_seconds: "obtained";
//     "held" (the last attempt found the lock held by another owner on some
//     node: contention, whether or not the context ended); "canceled" (the
//     context ended, and the last attempt, if any, saw no contention);
//     "no_quorum" (the attempts ran out, failing for other reasons than
//     contention: timeouts, recovering nodes, Redis errors); "breaker_open"
//     (refused at once, or still waiting when the context ended, because
//     the Client's circuit breaker was open); "closed" (the Client was
//     closed); "error" (anything else).
//   - result of attempts_total: "obtained", "held", "no_quorum", "error".
//   - to of breaker_transitions_total: "closed", "open", "half_open"
//     (redlock.BreakerEvent.To). breaker_state is the state after the last
//     change this Hook saw: give each Client its own Hook (WithConstLabels)
//     to tell their breakers apart. It is 0 until a first change.
//   - degraded_locks counts the locks of redlock.WithDegradedMode's lease
//     store (redlock.ObtainEvent.Degraded): they are in held_locks too.
//   - held_locks and hold_duration_seconds follow each lock by its
//     LockID: a lock counts from its ObtainEvent to its LostEvent or its
//     ReleaseEvent, whichever comes first.
//   - woken_by: "release", "timer", "context", "turn" (see
//     redlock.WaitEvent.WokenBy).
//   - outcome of hold_duration_seconds: "released" (held until Release) or
//     "lost" (held until the loss; the later Release is not counted again).
//   - result of refresh_total: "ok"; "not_held" (the lock is no longer
//     ours); "closed"; "failed" (no quorum confirmed in time: the lock may
//     still be valid). auto: "true" for the keep-alive, "false" for Refresh.
//   - result of release_total: "ok", "not_held" (already expired or taken),
//     "failed" (nodes did not answer; their keys expire with their TTL).
//   - op of ttl_chosen_seconds: "obtain", "refresh". reason: "given" (no
//     adaptive TTL, or redlock.WithFixedTTL), "base" (kept as asked),
//     "contention", "rtt", "min", "max", "hold_limit"
//     (redlock.ObtainEvent.TTLReason).
//   - op: "acquire", "refresh", "release". node: the node's index in the
//     slice given to redlock.New, "0" to "N-1". kind, on node_errors_total,
//     is the kind of the node's error (lock_kind is the lock's), its
//     redlock.NodeResult.Reason: "held", "not_owner", "wrong_kind" (the
//     name is a lock of another kind), "recovering", "timeout", "pending"
//     (not answered when the outcome was already decided), "skipped" (not
//     asked: after timeouts in a row, or too many requests in flight),
//     "not_replicated", and "error" for any other failure (a Redis error,
//     a refused connection).
//
// Node errors of acquire attempts come from every attempt's node results;
// those of refreshes and releases come from the *redlock.QuorumError of a
// failed manual refresh or release (an automatic refresh reports no node
// detail, and a successful refresh or release none at all). The redlock
// package reports a node's refusal of a refresh as ErrHeld ("held") and of
// a release as ErrNotOwner ("not_owner").
//
// Lock names are not labels: they are unbounded. WithLockLabel adds a "lock"
// label to every metric except the per-node ones (node_errors_total and the
// memory metrics) and rtt_p95_seconds, from a function that must
// map names to a small fixed set.
package redlockprom

// Package robust is redlock's robustness suite, beside the fault suite of
// tests/fault: lock clients run as processes in network namespaces of their
// own, against five nodes in theirs, under real network partitions, packet
// loss and delays (netlab), faults at points of the protocol (failpoint),
// randomized faults drawn from a seed, and process clocks offset by a time
// namespace or jumping while the process runs (procclock). Every run's history (package history) is checked for
// overlapping holders, token inversions, stale writes accepted and lost
// updates, and by porcupine for the linearizability of the fenced store.
// See docs/fault-testing.md, "Robustness tests".
//
// Every call into package redlock is in lockclient/lockclient.go.
package robust

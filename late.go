package redlock

// lateAnswers is the part of a lock that arranges the answers that came
// after their round was decided with the lock's Release, bits by node:
//
//   - confirmed has bit i set when node i answered yes in time to an
//     acquire or refresh round of the lock, so it held our key. Only such a
//     node's "not ours" at Release is evidence that the lock was lost
//     (certainlyNotOurs): another may not have received our key yet.
//   - Once the lock is releasing (ending: Release's round is out), a late
//     yes of an acquire or refresh round cleans up after itself
//     (settleLate).
//   - The won acquire round's answers still to come at its decision are
//     pending; Release sends its request to such a node after the
//     answer, so that its delete lands after the acquire's SET, and the
//     answer that finds the release waiting leaves its clean-up to it.
//
// The Lock's mu guards it (the acquire's Settle runs on the round's
// goroutines). It does no I/O, so that its arrangement is tested without
// Redis (late_test.go).
type lateAnswers struct {
	confirmed uint64
	// The won acquire round's answers that came after its decision:
	// pending are the nodes it had not heard from then, in those whose
	// answer is in. waits are the nodes to which Release holds back its
	// request until their answer (await), which closes next when it comes
	// in; handedOver those whose answer came while Release waited, and
	// left its clean-up to it. (They are the Lock's own, not made on
	// demand: a round on five nodes often has answers pending, and an
	// allocation more per cycle would cost more than their 40 bytes.)
	pending, in, waits, handedOver uint64
	next                           chan struct{}
}

// confirm records the nodes, of n, that answered yes in time to a round of
// the lock.
func (a *lateAnswers) confirm(n int, yes func(i int) bool) {
	for i := range n {
		if yes(i) {
			a.confirmed |= 1 << i
		}
	}
}

// expect records the nodes whose answer to the won acquire round was still
// to come at its decision (some may be in already), before the lock is
// shared.
func (a *lateAnswers) expect(pending uint64) {
	a.pending = pending
}

// arrive records the answer of node i to the won acquire round, which was
// definite unless ambiguous; it reports whether the answer is covered: the
// Release that waits for it sends its delete after it, so the answer needs
// no clean-up of its own. An answer without a definite outcome (a timeout)
// may come before its request ran on the node, so the release that
// follows it may still land first: it is never covered.
func (a *lateAnswers) arrive(i int, ambiguous bool) (covered bool) {
	bit := uint64(1) << i
	a.in |= bit
	covered = a.waits&bit != 0 && !ambiguous
	if covered {
		a.handedOver |= bit
	}
	if a.next != nil {
		close(a.next)
		a.next = nil
	}
	return covered
}

// startRelease makes Release's round wait for the acquire's answers still
// to come; it returns the confirmed nodes.
func (a *lateAnswers) startRelease() (confirmed uint64) {
	a.waits = a.pending &^ a.in
	return a.confirmed
}

// await is called by Release before it sends its request to node i: when
// the node's answer to the acquire round is still to come, it returns a
// channel closed when the next late answer comes in (the caller asks
// again), and node i's answer will leave its clean-up to the release; nil
// once node i's answer is in.
func (a *lateAnswers) await(i int) <-chan struct{} {
	bit := uint64(1) << i
	if a.pending&^a.in&bit == 0 {
		return nil
	}
	a.waits |= bit
	if a.next == nil {
		a.next = make(chan struct{})
	}
	return a.next
}

// abandon is called by Release when it stops waiting for node i's answer
// without sending its request: it reports whether that answer came and
// left its clean-up to the release, which must then be done anyway.
func (a *lateAnswers) abandon(i int) bool {
	bit := uint64(1) << i
	a.waits &^= bit
	return a.handedOver&bit != 0
}

// waiting is the nodes Release waits for (or waited for and has not
// abandoned).
func (a *lateAnswers) waiting() uint64 { return a.waits }

package redlock

import "time"

// adopt makes a lock just obtained (engine.attempt, on the nodes or from
// the lease store) or resumed (Client.Resume) the Client's, before it is
// shared: the one tail of both. base is the TTL from which WithAdaptiveTTL
// picks each refresh's TTL (0: every refresh asks for the lock's TTL, as
// a resumed lock's do); o's keep-alive options turn on its automatic
// refresh; the registry that Close releases takes it; and its first event
// (refresh or loss deadline) is scheduled when it is watched.
func (e *engine) adopt(l *Lock, o *obtainConfig, base time.Duration) {
	l.base = base
	if o.auto {
		l.keepAlive(o.interval, o.maxHold)
	}
	e.reg.add(l)
	l.schedule()
}

package redlockprom

import "sync"

// heldSet follows each lock a Hook saw obtained, by its LockID, so that its
// end is counted once: by its LostEvent or its ReleaseEvent, whichever comes
// first (a lost lock is still released later, with the same LockID).
//
// The events of one lock come from different goroutines: a loss found by
// the keep-alive, or a Close that releases the lock, can be reported
// before the obtain that returns it has reported its ObtainEvent. A lock
// whose end comes first is kept as ended, and its ObtainEvent then does not
// count it as held.
type heldSet struct {
	mu    sync.Mutex
	locks map[uint64]*heldLock
	early int // locks in locks whose ObtainEvent was not seen
}

type heldLock struct {
	degraded bool // ObtainEvent.Degraded
	obtained bool // its ObtainEvent was seen
	ended    bool // its LostEvent or its ReleaseEvent was seen
	released bool // its ReleaseEvent was seen
}

// maxEarly bounds the locks kept whose end came before their ObtainEvent.
// Each waits only for an event already on its way, but a LostEvent that
// comes after its lock's ReleaseEvent (a loss racing a Release) is kept too
// and never claimed; beyond maxEarly, such entries are dropped.
const maxEarly = 1024

// obtained records the ObtainEvent of lock id and reports whether the lock
// now counts as held: false when its end was seen first.
func (s *heldSet) obtained(id uint64, degraded bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.locks[id]; ok {
		l.obtained = true
		s.early--
		if l.released {
			delete(s.locks, id)
		}
		return false
	}
	if s.locks == nil {
		s.locks = make(map[uint64]*heldLock)
	}
	s.locks[id] = &heldLock{degraded: degraded, obtained: true}
	return true
}

// ended records the end of lock id: its LostEvent (released false) or its
// ReleaseEvent. first reports whether it is the lock's first end; counted,
// whether the lock counted as held until now (its ObtainEvent came first),
// and then degraded is that event's.
func (s *heldSet) ended(id uint64, released bool) (first, counted, degraded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[id]
	if !ok {
		// Ended before its ObtainEvent came.
		if s.early >= maxEarly {
			for old, l := range s.locks {
				if !l.obtained {
					delete(s.locks, old)
					s.early--
					break
				}
			}
		}
		if s.locks == nil {
			s.locks = make(map[uint64]*heldLock)
		}
		l = &heldLock{}
		s.locks[id] = l
		s.early++
	}
	first = !l.ended
	counted = first && l.obtained
	degraded = l.degraded
	l.ended = true
	l.released = l.released || released
	if l.released && l.obtained {
		// The last event of the lock.
		delete(s.locks, id)
	}
	return first, counted, degraded
}

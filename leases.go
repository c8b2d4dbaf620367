package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
)

// LeaseStore is the fallback of the degraded mode (WithDegradedMode): a
// table of leases, one per lock name, each with its owner, expiry and
// version. NewLocalLeases is one in this process's memory; the module
// github.com/redlock-go/redlock/redlocksql keeps one in SQLite or
// PostgreSQL. Implementations must be safe for concurrent use.
//
// A lease expires on its own at its expiry, on the store's clock. Writes
// must be idempotent: Acquire by the owner of a live lease extends it and
// returns the same version, so that a retried request cannot take a second
// lease. Versions of one name only increase, from one lease to the next,
// and lie in [1, MaxLeaseVersion): the lock's token is built from them
// (Lock.Token).
type LeaseStore interface {
	// Acquire takes the lease on name for owner, for ttl from now, when no
	// live lease of another owner exists. It returns Lease.Acquired false,
	// and the holder's remaining time, when one does.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error)
	// Extend moves the expiry of owner's live lease of this version to ttl
	// from now. It returns false when the lease has expired, was released,
	// or belongs to another owner or version.
	Extend(ctx context.Context, name, owner string, version int64, ttl time.Duration) (bool, error)
	// Release ends owner's live lease of this version; version 0 ends
	// owner's live lease whatever its version. It returns false, and no
	// error, when there is none: the lease has expired, was released, or
	// belongs to another owner or version. The Client then reports the
	// release as ErrNotHeld, as a release on the nodes does.
	Release(ctx context.Context, name, owner string, version int64) (bool, error)
}

// Lease is a LeaseStore's answer to Acquire.
type Lease struct {
	// Acquired is true when the lease is owner's.
	Acquired bool
	// Version is the lease's version when Acquired.
	Version int64
	// Remaining is the live lease's remaining time when not Acquired (-1
	// when not known).
	Remaining time.Duration
}

// MaxLeaseVersion bounds the versions of a LeaseStore: they lie in
// [1, MaxLeaseVersion), 2⁶².
const MaxLeaseVersion = limits.MaxLeaseVersion

// NewLocalLeases returns a LeaseStore in this process's memory: it excludes
// only the Clients of this process that share it. Versions start from the
// wall clock in milliseconds × 1024 and only increase, so that they keep
// increasing across restarts of the process while its clock does not go
// back.
func NewLocalLeases() LeaseStore {
	return &localLeases{leases: make(map[string]localLease), now: time.Now}
}

type localLeases struct {
	mu     sync.Mutex
	leases map[string]localLease
	last   int64 // the last version given
	now    func() time.Time
	// pruneAt is the table size at which expired leases are next forgotten.
	pruneAt int
}

type localLease struct {
	owner   string
	version int64
	expiry  time.Time // on the monotonic clock
}

func (s *localLeases) Acquire(_ context.Context, name, owner string, ttl time.Duration) (Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.prune(now)
	if cur, ok := s.leases[name]; ok && now.Before(cur.expiry) {
		if cur.owner != owner {
			return Lease{Remaining: cur.expiry.Sub(now)}, nil
		}
		cur.expiry = now.Add(ttl)
		s.leases[name] = cur
		return Lease{Acquired: true, Version: cur.version}, nil
	}
	s.last = max(s.last+1, now.UnixMilli()*1024)
	s.leases[name] = localLease{owner: owner, version: s.last, expiry: now.Add(ttl)}
	return Lease{Acquired: true, Version: s.last}, nil
}

func (s *localLeases) Extend(_ context.Context, name, owner string, version int64, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur, ok := s.leases[name]
	if !ok || cur.owner != owner || cur.version != version || !now.Before(cur.expiry) {
		return false, nil
	}
	cur.expiry = now.Add(ttl)
	s.leases[name] = cur
	return true, nil
}

func (s *localLeases) Release(_ context.Context, name, owner string, version int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.leases[name]
	if !ok || cur.owner != owner || (version != 0 && cur.version != version) {
		return false, nil
	}
	// Forgotten whether live or not: an expired lease is free already.
	delete(s.leases, name)
	return s.now().Before(cur.expiry), nil
}

// prune forgets expired leases once the table has grown: versions come
// from s.last, so nothing is lost with them.
func (s *localLeases) prune(now time.Time) {
	if len(s.leases) < max(s.pruneAt, 1024) {
		return
	}
	for name, l := range s.leases {
		if !now.Before(l.expiry) {
			delete(s.leases, name)
		}
	}
	s.pruneAt = 2 * len(s.leases)
}

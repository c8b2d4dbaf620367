// Package store is the fenced record of the fault-injection and robustness
// suites (tests/fault, tests/robust): one counter in Redis behind package
// fence (fence.Redis), named by the suites' operations, with the counts of
// accepted and refused operations that fence keeps in the record.
//
// It allows negative tokens (fence.AllowNegative): the suites' degraded
// mode scenarios check that the fence orders the degraded holders of one
// lease store among themselves, and refuses them all once a token from
// Redis has been seen.
package store

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fence"
)

// ErrStale is fence.ErrStale: every refusal matches it.
var ErrStale = fence.ErrStale

// Store is one fenced record. It is safe for concurrent use.
type Store struct {
	r   *fence.Redis
	key string
}

// New returns the store named name in rdb. The caller owns rdb.
func New(rdb redis.UniversalClient, name string) *Store {
	return &Store{r: fence.NewRedis(rdb, fence.AllowNegative()), key: "fenced:" + name}
}

// Write stores value if token is at least the highest token the store has
// seen (fence.Redis.Set). It returns an error wrapping ErrStale otherwise.
func (s *Store) Write(ctx context.Context, token int64, value string) error {
	return s.r.Set(ctx, s.key, fence.Token(token), value)
}

// ReadFenced returns the stored value for a read-modify-write by the holder
// of token, and records the token (fence.Redis.Get), so that an older
// holder can no longer write. It returns an error wrapping ErrStale when
// token is below the highest seen.
func (s *Store) ReadFenced(ctx context.Context, token int64) (string, error) {
	v, _, err := s.r.Get(ctx, s.key, fence.Token(token))
	return v, err
}

// ReadShared returns the stored value for the holder of a shared (read)
// lock with token (fence.Redis.GetShared). It returns an error wrapping
// ErrStale when an exclusive holder with a higher token has read or
// written.
func (s *Store) ReadShared(ctx context.Context, token int64) (string, error) {
	v, _, err := s.r.GetShared(ctx, s.key, fence.Token(token))
	return v, err
}

// Read returns the stored value and the highest token of an exclusive
// holder.
func (s *Store) Read(ctx context.Context) (value string, token int64, err error) {
	st, err := s.r.Inspect(ctx, s.key)
	return st.Value, st.Fence, err
}

// Stats counts the writes the store accepted and the operations it
// refused.
func (s *Store) Stats(ctx context.Context) (accepted, rejected int64, err error) {
	st, err := s.r.Inspect(ctx, s.key)
	return st.Writes, st.Refused, err
}

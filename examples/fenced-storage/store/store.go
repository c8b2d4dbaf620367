// Package store is a small storage service guarded by fencing tokens: a
// record in Redis that accepts a write only with a token at least as high
// as the highest it has accepted, atomically with the write. It records
// every accepted and rejected write, for the fault-injection suite.
package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrStale is returned for a write whose token is lower than one the store
// has already accepted: its writer has lost the lock.
var ErrStale = errors.New("store: stale fencing token")

var (
	//go:embed write.lua
	writeSrc string
	//go:embed read.lua
	readSrc string
	//go:embed shared.lua
	sharedSrc string

	write  = redis.NewScript(writeSrc)
	read   = redis.NewScript(readSrc)
	shared = redis.NewScript(sharedSrc)
)

// Store is one fenced record. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	name string
}

// New returns the store named name in rdb. The caller owns rdb.
func New(rdb redis.UniversalClient, name string) *Store {
	return &Store{rdb: rdb, name: name}
}

func (s *Store) keys() []string {
	tag := "{fenced:" + s.name + "}"
	return []string{tag + ":value", tag + ":token", tag + ":log", tag + ":rtoken"}
}

// Write stores value if token is at least the highest token accepted so
// far. It returns an error wrapping ErrStale otherwise.
func (s *Store) Write(ctx context.Context, token int64, value string) error {
	err := write.Run(ctx, s.rdb, s.keys(), token, value).Err()
	if err != nil && strings.HasPrefix(err.Error(), "STALE") {
		return fmt.Errorf("%w: %v", ErrStale, err)
	}
	return err
}

// ReadFenced returns the stored value for a read-modify-write by the holder
// of token. The store remembers the token, so that a holder with a lower
// token (one that lost its lock while paused) can no longer write: without
// that, its write could land before the newer holder's, be accepted, and the
// newer holder's write, based on the same read, would then lose it. It
// returns an error wrapping ErrStale when token is lower than one already
// seen.
func (s *Store) ReadFenced(ctx context.Context, token int64) (string, error) {
	v, err := read.Run(ctx, s.rdb, s.keys(), token).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil && strings.HasPrefix(err.Error(), "STALE"):
		return "", fmt.Errorf("%w: %v", ErrStale, err)
	}
	return v, err
}

// ReadShared returns the stored value for the holder of a shared (read)
// lock with token (the reader of redlock.Client.RWMutex). Readers overlap
// and their tokens are not ordered among themselves, so a read is refused
// only when a holder of the exclusive lock with a higher token has read or
// written (its reader was overtaken): it returns an error wrapping ErrStale
// then. The store remembers the highest reader token: a writer with a lower
// token (one that lost its lock) can no longer write or read with
// ReadFenced.
func (s *Store) ReadShared(ctx context.Context, token int64) (string, error) {
	v, err := shared.Run(ctx, s.rdb, s.keys(), token).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil && strings.HasPrefix(err.Error(), "STALE"):
		return "", fmt.Errorf("%w: %v", ErrStale, err)
	}
	return v, err
}

// Read returns the stored value and the highest token accepted.
func (s *Store) Read(ctx context.Context) (value string, token int64, err error) {
	k := s.keys()
	vals, err := s.rdb.MGet(ctx, k[0], k[1]).Result()
	if err != nil {
		return "", 0, err
	}
	if v, ok := vals[0].(string); ok {
		value = v
	}
	if t, ok := vals[1].(string); ok {
		token, _ = strconv.ParseInt(t, 10, 64)
	}
	return value, token, nil
}

// Stats counts the writes the store accepted and rejected.
func (s *Store) Stats(ctx context.Context) (accepted, rejected int64, err error) {
	m, err := s.rdb.HGetAll(ctx, s.keys()[2]).Result()
	if err != nil {
		return 0, 0, err
	}
	accepted, _ = strconv.ParseInt(m["accepted"], 10, 64)
	rejected, _ = strconv.ParseInt(m["rejected"], 10, 64)
	return accepted, rejected, nil
}

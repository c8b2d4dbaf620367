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

//go:embed write.lua
var writeSrc string

var write = redis.NewScript(writeSrc)

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
	return []string{tag + ":value", tag + ":token", tag + ":log"}
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

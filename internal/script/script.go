// Package script holds the Lua scripts that run on each Redis node, their
// argument encoding and the decoding of their replies.
//
// Each script is wrapped once in redis.NewScript, so it runs with EVALSHA and
// falls back to EVAL when the node answers NOSCRIPT (after SCRIPT FLUSH or a
// restart).
package script

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed refresh.lua
	refreshSrc string

	acquire = redis.NewScript(acquireSrc)
	release = redis.NewScript(releaseSrc)
	refresh = redis.NewScript(refreshSrc)
)

// Acquired is the decoded reply of the acquire script.
type Acquired struct {
	OK bool
	// HolderTTL is the remaining time to live of the current holder when
	// OK is false; negative when the key has no expiry.
	HolderTTL time.Duration
}

// Acquire runs the acquire script on one node.
func Acquire(ctx context.Context, c redis.Scripter, key, value string, ttl time.Duration) (Acquired, error) {
	v, err := acquire.Run(ctx, c, []string{key}, value, ms(ttl)).Result()
	if err != nil {
		return Acquired{}, err
	}
	return decodeAcquire(v)
}

func decodeAcquire(v any) (Acquired, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
	}
	status, ok := a[0].(int64)
	if !ok {
		return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
	}
	switch status {
	case 1:
		return Acquired{OK: true}, nil
	case 0:
		if len(a) < 2 {
			return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
		}
		pttl, ok := a[1].(int64)
		if !ok {
			return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
		}
		return Acquired{HolderTTL: time.Duration(pttl) * time.Millisecond}, nil
	}
	return Acquired{}, fmt.Errorf("redlock: unexpected acquire status %d", status)
}

// Released is the decoded reply of the release script.
type Released struct {
	// Deleted is true when the key held our value and was deleted.
	Deleted bool
	// Receivers is how many subscribed connections heard the
	// notification that the lock is free.
	Receivers int64
}

// Release runs the compare-and-delete script on one node, publishing on
// channel (with SPUBLISH when sharded) when the key is free afterwards.
func Release(ctx context.Context, c redis.Scripter, key, value, channel string, sharded bool) (Released, error) {
	flag := "0"
	if sharded {
		flag = "1"
	}
	v, err := release.Run(ctx, c, []string{key}, value, channel, flag).Int64Slice()
	if err != nil {
		return Released{}, err
	}
	if len(v) != 2 {
		return Released{}, fmt.Errorf("redlock: unexpected release reply %v", v)
	}
	return Released{Deleted: v[0] == 1, Receivers: v[1]}, nil
}

// RefreshResult is what the refresh script did on one node.
type RefreshResult int

const (
	// NotOwner: another owner holds the key; nothing was changed.
	NotOwner RefreshResult = 0
	// Extended: the key held our value and its expiry was set.
	Extended RefreshResult = 1
	// Reseeded: the key was missing and was set again with our value.
	Reseeded RefreshResult = 2
)

// Refresh runs the refresh script on one node.
func Refresh(ctx context.Context, c redis.Scripter, key, value string, ttl time.Duration) (RefreshResult, error) {
	n, err := refresh.Run(ctx, c, []string{key}, value, ms(ttl)).Int64()
	if err != nil {
		return NotOwner, err
	}
	if n < 0 || n > 2 {
		return NotOwner, fmt.Errorf("redlock: unexpected refresh reply %d", n)
	}
	return RefreshResult(n), nil
}

// ms encodes a duration as whole milliseconds for PX and PEXPIRE.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// RefreshItem is one lock in a batched refresh.
type RefreshItem struct {
	Key   string
	Value string
	TTL   time.Duration
}

// RefreshBatch runs the refresh script for every item on one node in one
// pipeline, re-running with EVAL those the node answered NOSCRIPT. It
// returns each item's result and error; err is set when the node itself
// failed (a network error or timeout), and then no item's result counts.
func RefreshBatch(ctx context.Context, c redis.UniversalClient, items []RefreshItem) (results []RefreshResult, errs []error, err error) {
	cmds := make([]*redis.Cmd, len(items))
	pipe := c.Pipeline()
	for i, it := range items {
		cmds[i] = refresh.EvalSha(ctx, pipe, []string{it.Key}, it.Value, ms(it.TTL))
	}
	if _, err := pipe.Exec(ctx); err != nil && !isReply(err) {
		return nil, nil, err
	}
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = c.Pipeline()
		for _, i := range again {
			it := items[i]
			cmds[i] = refresh.Eval(ctx, pipe, []string{it.Key}, it.Value, ms(it.TTL))
		}
		if _, err := pipe.Exec(ctx); err != nil && !isReply(err) {
			return nil, nil, err
		}
	}
	results = make([]RefreshResult, len(items))
	errs = make([]error, len(items))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n < 0 || n > 2:
			errs[i] = fmt.Errorf("redlock: unexpected refresh reply %d", n)
		default:
			results[i] = RefreshResult(n)
		}
	}
	return results, errs, nil
}

// isReply reports whether err is an error reply from Redis (about one
// command), as opposed to a failure of the connection.
func isReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// epochRecord is a node's epoch record (the restart guard's, written by
// internal/script's epoch.lua; docs/fencing.md) as inspect and doctor read
// it, with the node's own run_id and time.
type epochRecord struct {
	key     string
	present bool
	run     string // the run_id of the process that last checked the record
	base    int64  // node ms: when the epoch's forgetting could have happened
	maxTTL  int64  // ms: the largest max TTL any guarded Client has sent
	until   int64  // node ms: base + maxTTL, the end of the recovery
	kind    string // how the epoch began: new, restart, failover
	runID   string // the node's current run_id
	now     int64  // the node's time, ms
}

// readEpoch reads the epoch record at key, the node's run_id and its time.
// On a Redis Cluster it asks the master that serves the key.
func readEpoch(ctx context.Context, rc redis.UniversalClient, key string) (epochRecord, error) {
	r := epochRecord{key: key}
	var node redis.Cmdable = rc
	if cc, ok := rc.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return r, err
		}
		node = m
	}
	rec, err := node.HMGet(ctx, key, "run", "base", "maxttl", "until", "kind").Result()
	if err != nil {
		return r, err
	}
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		return r, err
	}
	r.runID = parseInfo(info)["run_id"]
	now, err := node.Time(ctx).Result()
	if err != nil {
		return r, err
	}
	r.now = now.UnixMilli()
	str := func(i int) string { s, _ := rec[i].(string); return s }
	num := func(i int) (int64, bool) {
		v, err := strconv.ParseInt(str(i), 10, 64)
		return v, err == nil
	}
	r.run, r.kind = str(0), str(4)
	var okB, okM, okU bool
	r.base, okB = num(1)
	r.maxTTL, okM = num(2)
	r.until, okU = num(3)
	if r.run == "" && !okU {
		return r, nil // no record
	}
	if !okU {
		return r, fmt.Errorf("epoch record %s has no valid until", key)
	}
	r.present = true
	if !okB || !okM {
		// An older layout: until alone.
		r.base, r.maxTTL = r.until, 0
	}
	return r, nil
}

// restarted is true when the process that last checked the record is not
// the node's current one: a restart or a promotion since. The node's next
// acquire with the guard on starts a new epoch and recovers from then.
func (r epochRecord) restarted() bool {
	return r.present && r.run != "" && r.runID != "" && r.run != r.runID
}

// left is how long the node still recovers by its record (0: it votes).
func (r epochRecord) left() time.Duration {
	return max(time.Duration(r.until-r.now)*time.Millisecond, 0)
}

// window is the recovery window the record holds: its largest max TTL.
func (r epochRecord) window() time.Duration { return time.Duration(r.maxTTL) * time.Millisecond }

// state is the record as inspect's EPOCH column says it.
func (r epochRecord) state() string {
	switch {
	case !r.present:
		return "no record"
	case r.restarted():
		return "restarted: recovers from its next guarded request"
	case r.left() > 0:
		return "recovering " + r.left().Round(time.Millisecond).String()
	}
	return "voting"
}

// lowerEpochScript lowers an epoch record's max TTL to ARGV[1] ms (never
// raises it) and moves its end of recovery to base + that, in one step, on
// the record's own base; it returns the new end (node ms), or -1 when the
// key holds no record. docs/fencing.md ("A recovery window longer than the
// max TTL") gives it, and says when running it is safe.
const lowerEpochScript = `local b = tonumber(redis.call('HGET', KEYS[1], 'base')) local m = tonumber(redis.call('HGET', KEYS[1], 'maxttl')) if not (b and m) then return -1 end m = math.min(m, tonumber(ARGV[1])) redis.call('HSET', KEYS[1], 'maxttl', m, 'until', b + m) redis.call('DEL', KEYS[1] .. ':ok') return b + m`

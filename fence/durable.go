package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotDurable is matched by the error of a Redis write made with Durable
// when the replicas asked for did not acknowledge it within the timeout,
// or the wait failed. The master applied the write (Get and Add return
// what it answered beside the error): a failover before the replicas have
// it may lose it. Write again with the same sequencer until it is durable
// (a Set or Get is the same call again; a retried Add is applied again),
// or treat the resource's state as unknown.
var ErrNotDurable = errors.New("fence: write not acknowledged by the replicas (Durable)")

// Durable makes every write of a Redis (Set, Get, GetShared, Add, Eval,
// Reset and a Guard's Admit) wait until replicas replicas of the key's
// master acknowledged it, at most timeout, with WAIT on the connection
// that wrote, as redlock's WithReplicaAck does for locks: an acknowledged
// fence is then on the replicas, and a promoted replica that has it
// refuses a stale token as its master did (docs/fencing.md, "Durable
// fences"). A write the replicas did not acknowledge in time returns an
// error matching ErrNotDurable. A refused write (a stale token) does not
// wait. Durable(0, …), the default, does not wait.
//
// The client must give one connection of the key's master: a
// *redis.Client (standalone or Sentinel's failover client), a
// *redis.ClusterClient or a *redis.Ring; any other client makes every
// write fail with ErrInvalid. replicas below 0, or above 0 with a timeout
// of 0 or less (WAIT 0 blocks for ever), makes every call fail with
// ErrInvalid. A Table and a Guard ignore it (a Guard's store is yours;
// *Redis as a store follows its own options).
func Durable(replicas int, timeout time.Duration) Option {
	return optionFunc(func(o *options) { o.ack = durable{replicas, timeout} })
}

// durable is Durable's setting; zero replicas: writes do not wait.
type durable struct {
	replicas int
	timeout  time.Duration
}

// valid refuses a setting WAIT cannot honour.
func (d durable) valid() error {
	if d.replicas < 0 || d.replicas > 0 && d.timeout <= 0 {
		return invalid("Durable(%d, %v): replicas must be 0 or more, and the timeout above 0", d.replicas, d.timeout)
	}
	return nil
}

// scripter is what a script runs on: the client, or one connection of
// it.
type scripter interface {
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
}

// exec runs sc on keys with argv (EVALSHA, or EVAL when sc has no digest
// or the node lacks the script) as the call id of s, turns the reply's
// refusals into the package's errors, and with Durable waits for the
// replicas on the connection that ran it.
func (r *Redis) exec(ctx context.Context, sc script, id string, s Sequencer, keys []string, argv []any) (any, error) {
	on := scripter(r.rdb)
	var conn *redis.Conn
	if r.opts.ack.replicas > 0 {
		c, err := r.conn(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		defer c.Close()
		on, conn = c, c
	}
	var v any
	err := errNoScript
	if sc.sha != "" {
		v, err = on.EvalSha(ctx, sc.sha, keys, argv...).Result()
	}
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = on.Eval(ctx, sc.src, keys, argv...).Result()
	}
	err = r.reply(keys[0], id, s, err)
	if conn == nil || err != nil && !errors.Is(err, redis.Nil) {
		return v, err
	}
	if werr := r.wait(ctx, conn, keys[0]); werr != nil {
		return v, werr
	}
	return v, err
}

// errNoScript stands for the NOSCRIPT reply of a script without a digest,
// which goes straight to EVAL.
var errNoScript = errors.New("NOSCRIPT no digest")

// conn returns one connection to the master of key, on which WAIT counts
// the replicas of the writes made before it.
func (r *Redis) conn(ctx context.Context, key string) (*redis.Conn, error) {
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("fence: %s: the master of its slot: %w", key, err)
		}
		return m.Conn(), nil
	case *redis.Ring:
		m, err := c.GetShardClientForKey(key)
		if err != nil {
			return nil, fmt.Errorf("fence: %s: the shard of the key: %w", key, err)
		}
		return m.Conn(), nil
	case interface{ Conn() *redis.Conn }:
		return c.Conn(), nil
	}
	return nil, invalid("Durable: a %T gives no connection of its own, on which WAIT must follow the write", r.rdb)
}

// wait waits, with WAIT on conn, until Durable's replicas acknowledged the
// writes made on it, and says ErrNotDurable when they did not in time.
func (r *Redis) wait(ctx context.Context, conn *redis.Conn, key string) error {
	a := r.opts.ack
	n, err := conn.Wait(ctx, a.replicas, a.timeout).Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: the master applied the write, and WAIT failed: %w", ErrNotDurable, key, err)
	case n < int64(a.replicas):
		return fmt.Errorf("%w: %s: %d of %d replicas acknowledged the write within %v; the master applied it, and a failover before they do may lose it",
			ErrNotDurable, key, n, a.replicas, a.timeout)
	}
	return nil
}

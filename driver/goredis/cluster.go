package goredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
)

// A WAIT counts the replicas that acknowledged the writes made on its own
// connection. go-redis's Cluster pipeline sends each command to the master
// of its key's slot and a keyless one, such as WAIT, to any master (a
// Ring's, to the shard of the empty key): a WAIT sent after a script then
// lands on another server's connection, which wrote nothing, and returns
// at once with that server's replica count. So a Cluster or Ring pipeline
// with a WAIT is sent, whole, on one connection to the server of its keys,
// through go-redis's client of that server.

// pipeline returns the pipeliner for cmds: the node's own, or, on a Redis
// Cluster or a Ring when cmds holds a command bound to its connection
// (WAIT), one on the server of the pipeline's keys.
func (n *Node) pipeline(ctx context.Context, cmds [][]any) (redis.Pipeliner, error) {
	var shard func(key string) (*redis.Client, error)
	switch c := n.c.(type) {
	case *redis.ClusterClient:
		shard = func(key string) (*redis.Client, error) { return c.MasterForKey(ctx, key) }
	case *redis.Ring:
		shard = c.GetShardClientForKey
	}
	if shard == nil || !connBound(cmds) {
		return n.c.Pipeline(), nil
	}
	m, err := serverOf(shard, cmds)
	if err != nil {
		return nil, err
	}
	return m.Pipeline(), nil
}

// connBound1 reports whether one command's reply depends on the
// connection it runs on (WAIT, WAITAOF).
func connBound1(args []any) bool {
	if len(args) == 0 {
		return false
	}
	name, ok := args[0].(string)
	return ok && (strings.EqualFold(name, "WAIT") || strings.EqualFold(name, "WAITAOF"))
}

// connBound reports whether cmds holds a command whose reply depends on
// the connection it runs on (WAIT, WAITAOF).
func connBound(cmds [][]any) bool {
	for _, args := range cmds {
		if connBound1(args) {
			return true
		}
	}
	return false
}

// errWaitRouting is the failure of a sharded pipeline with a WAIT that
// cannot be sent on one connection with its writes.
var errWaitRouting = errors.New("redlock: on a Redis Cluster or a Ring, a pipeline with WAIT needs keys of one server, for WAIT to count its writes")

// serverOf returns go-redis's client of the server (a Cluster's master, a
// Ring's shard) that serves every key of cmds.
func serverOf(shard func(string) (*redis.Client, error), cmds [][]any) (*redis.Client, error) {
	var server *redis.Client
	for _, args := range cmds {
		key, ok := firstKey(args)
		if !ok {
			continue
		}
		m, err := shard(key)
		if err != nil {
			return nil, err
		}
		if server != nil && m != server {
			return nil, fmt.Errorf("%w: the keys are on several servers", errWaitRouting)
		}
		server = m
	}
	if server == nil {
		return nil, fmt.Errorf("%w: it has no key", errWaitRouting)
	}
	return server, nil
}

// newCmd is a go-redis command of args. An FCALL (the acquire, a Redis
// Function) is given the position of its first key: go-redis before
// v9.23.0 routes FCALL by its first argument, the function's name, so a
// Ring sent every acquire to the shard of that name, whatever the lock's
// key (TestRingLocksOnEveryShard failed on v9.16.0 without this).
func newCmd(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	if len(args) == 0 {
		return cmd
	}
	// Not firstKey, whose strings.ToUpper allocates for the lower-case
	// "fcall" the library sends: one allocation per acquire.
	if name, _ := args[0].(string); len(args) >= 4 && (strings.EqualFold(name, "FCALL") || strings.EqualFold(name, "FCALL_RO")) {
		if numkeys, err := strconv.Atoi(driver.Arg(args[2])); err == nil && numkeys >= 1 {
			cmd.SetFirstKeyPos(3)
		}
	}
	return cmd
}

// firstKey returns a command's first key: for the commands redlock
// sends, the first key of a script (after numkeys), none for the commands
// that name no key, and the first argument of any other.
func firstKey(args []any) (string, bool) {
	if len(args) < 2 {
		return "", false
	}
	name, _ := args[0].(string)
	switch strings.ToUpper(name) {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
		if len(args) < 4 {
			return "", false
		}
		if numkeys, err := strconv.Atoi(driver.Arg(args[2])); err != nil || numkeys < 1 {
			return "", false
		}
		return driver.Arg(args[3]), true
	case "PING", "ECHO", "INFO", "TIME", "WAIT", "WAITAOF", "PUBLISH", "PUBSUB", "SCRIPT",
		"CLUSTER", "CONFIG", "CLIENT", "COMMAND", "DBSIZE", "FLUSHALL", "FLUSHDB", "LASTSAVE",
		"ROLE", "HELLO", "AUTH", "SELECT", "DEBUG", "MEMORY", "LATENCY", "SLOWLOG", "FUNCTION":
		return "", false
	}
	return driver.Arg(args[1]), true
}

// redirected asks a Cluster client to reload its view of the slots when a
// reply of a pipeline sent to one master says the slot moved: go-redis
// follows a MOVED in its own routing, not on a master's client.
func (n *Node) redirected(ctx context.Context, out []redis.Cmder) {
	cc, ok := n.c.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, cmd := range out {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "MOVED ") {
			cc.ReloadState(ctx)
			return
		}
	}
}

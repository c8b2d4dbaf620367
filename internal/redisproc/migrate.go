package redisproc

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// MigrateSlot moves a slot of the cluster, with its keys, to the master
// Servers[to], as redis-cli --cluster reshard does: the target imports
// it, the owner marks it migrating, MIGRATE moves its keys, and CLUSTER
// SETSLOT NODE gives it to the target on the target, then on the former
// owner (which drops the slot's sharded subscriptions, sending them
// sunsubscribe) and on every other master. It returns once every master
// says the target serves the slot. Moving a slot to its owner does
// nothing.
func (c *Cluster) MigrateSlot(ctx context.Context, slot, to int) error {
	if slot < 0 || slot >= 16384 {
		return fmt.Errorf("redisproc: slot %d is not in 0..16383", slot)
	}
	if to < 0 || to >= len(c.Servers) {
		return fmt.Errorf("redisproc: no master %d in a cluster of %d", to, len(c.Servers))
	}
	clients, ids, err := c.admin(ctx)
	defer closeAll(clients)
	if err != nil {
		return err
	}
	from, err := owner(ctx, clients[to], ids, slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	src, dst := clients[from], clients[to]
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]).Err(); err != nil {
		return fmt.Errorf("redisproc: SETSLOT %d IMPORTING at %s: %w", slot, c.Servers[to].Addr(), err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err(); err != nil {
		return fmt.Errorf("redisproc: SETSLOT %d MIGRATING at %s: %w", slot, c.Servers[from].Addr(), err)
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("redisproc: GETKEYSINSLOT %d: %w", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", c.Servers[to].Port(), "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("redisproc: MIGRATE of slot %d: %w", slot, err)
		}
	}
	order := []int{to, from}
	for i := range c.Servers {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := clients[i].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err(); err != nil {
			return fmt.Errorf("redisproc: SETSLOT %d NODE at %s: %w", slot, c.Servers[i].Addr(), err)
		}
	}
	for i := range clients {
		err := waitFor(ctx, func() (bool, error) {
			o, err := slotOwner(ctx, clients[i], slot)
			return o == ids[to], err
		})
		if err != nil {
			return fmt.Errorf("redisproc: %s does not see slot %d moved: %w", c.Servers[i].Addr(), slot, err)
		}
	}
	return nil
}

// Owner returns the index in Servers of the master that serves slot,
// as Servers[0] sees it.
func (c *Cluster) Owner(ctx context.Context, slot int) (int, error) {
	clients, ids, err := c.admin(ctx)
	defer closeAll(clients)
	if err != nil {
		return -1, err
	}
	return owner(ctx, clients[0], ids, slot)
}

// admin returns a client of each master and the masters' node IDs.
func (c *Cluster) admin(ctx context.Context) ([]*redis.Client, []string, error) {
	var (
		clients []*redis.Client
		ids     []string
	)
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		clients = append(clients, cl)
		id, err := cl.ClusterMyID(ctx).Result()
		if err != nil {
			return clients, nil, fmt.Errorf("redisproc: CLUSTER MYID at %s: %w", s.Addr(), err)
		}
		ids = append(ids, id)
	}
	return clients, ids, nil
}

func closeAll(clients []*redis.Client) {
	for _, c := range clients {
		_ = c.Close()
	}
}

// owner returns the index in ids of the master that c says serves slot.
func owner(ctx context.Context, c *redis.Client, ids []string, slot int) (int, error) {
	id, err := slotOwner(ctx, c, slot)
	if err != nil {
		return -1, err
	}
	for i := range ids {
		if ids[i] == id {
			return i, nil
		}
	}
	return -1, fmt.Errorf("redisproc: slot %d is served by %s, not a master of this cluster", slot, id)
}

// slotOwner returns the node ID of the master that c says serves slot
// (CLUSTER SHARDS, Redis 7.0).
func slotOwner(ctx context.Context, c *redis.Client, slot int) (string, error) {
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("redisproc: CLUSTER SHARDS at %s: %w", c.Options().Addr, err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > int64(slot) || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					return n.ID, nil
				}
			}
		}
	}
	return "", fmt.Errorf("redisproc: %s serves slot %d on no node", c.Options().Addr, slot)
}

// KeySlot is the Cluster slot of key, as CLUSTER KEYSLOT computes it on
// the cluster's first master.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	cl := redis.NewClient(&redis.Options{Addr: c.Servers[0].Addr(), MaxRetries: -1})
	defer cl.Close()
	n, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("redisproc: CLUSTER KEYSLOT %q: %w", key, err)
	}
	return int(n), nil
}

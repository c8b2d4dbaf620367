package redisproc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, all on loopback.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts a Redis Cluster of n masters (n ≥ 1) with the 16384
// slots split evenly, and waits until every master reports cluster_state:ok.
// The caller must call Stop.
func StartCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redisproc: a cluster needs at least one master, not %d", n)
	}
	c := &Cluster{}
	for range n {
		s, err := StartServer(Options{Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		}})
		if err != nil {
			_ = c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	if err := c.form(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 16384
	per := slots / len(c.Servers)
	for i, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Servers)-1 {
			hi = slots - 1
		}
		err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err()
		if err == nil && i > 0 {
			err = cl.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Servers[0].Port())).Err()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("redisproc: form cluster at %s: %w", s.Addr(), err)
		}
	}
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		err := waitFor(ctx, func() (bool, error) {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err
			}
			return strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Servers))), nil
		})
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("redisproc: cluster at %s not ok: %w", s.Addr(), err)
		}
	}
	return nil
}

// Addrs lists the masters' addresses.
func (c *Cluster) Addrs() []string { return Addrs(c.Servers) }

// Client returns a new cluster client with context deadlines honoured. The
// caller must close it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
	})
}

// Stop stops every server of the cluster.
func (c *Cluster) Stop() error {
	var first error
	for _, s := range c.Servers {
		if err := s.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitFor polls cond every 20 ms until it is true or ctx ends.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	var last error
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

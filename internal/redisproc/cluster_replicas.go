package redisproc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplicatedCluster is a Redis Cluster of masters with one replica each,
// all on loopback.
type ReplicatedCluster struct {
	// Cluster holds the masters.
	*Cluster
	// Replicas[i] replicates Cluster.Servers[i].
	Replicas []*Server
}

// StartReplicatedCluster starts a Redis Cluster of n masters (n ≥ 1), the
// slots split evenly as StartCluster does, and one replica of each master,
// and waits until every replica's link to its master is up and every
// master sees its replica online. The caller must call Stop.
func StartReplicatedCluster(n int) (*ReplicatedCluster, error) {
	masters, err := StartCluster(n)
	if err != nil {
		return nil, err
	}
	c := &ReplicatedCluster{Cluster: masters}
	for range n {
		s, err := StartServer(Options{Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
			"--repl-diskless-sync-delay", "0",
		}})
		if err != nil {
			_ = c.Stop()
			return nil, err
		}
		c.Replicas = append(c.Replicas, s)
	}
	if err := c.attach(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// attach makes each replica server meet the cluster and replicate its
// master, and waits until replication runs.
func (c *ReplicatedCluster) attach() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, r := range c.Replicas {
		m := c.Servers[i]
		mc := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
		rc := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
		err := func() error {
			id, err := mc.ClusterMyID(ctx).Result()
			if err != nil {
				return err
			}
			// Without it a master waits 5 s before the first sync.
			if err := mc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
				return err
			}
			if err := rc.ClusterMeet(ctx, "127.0.0.1", fmt.Sprint(m.Port())).Err(); err != nil {
				return err
			}
			// CLUSTER REPLICATE needs the replica to know the master.
			if err := waitFor(ctx, func() (bool, error) {
				nodes, err := rc.ClusterNodes(ctx).Result()
				return err == nil && strings.Contains(nodes, id), err
			}); err != nil {
				return err
			}
			if err := rc.Do(ctx, "CLUSTER", "REPLICATE", id).Err(); err != nil {
				return err
			}
			return waitFor(ctx, func() (bool, error) {
				rinfo, err := rc.Info(ctx, "replication").Result()
				if err != nil {
					return false, err
				}
				minfo, err := mc.Info(ctx, "replication").Result()
				if err != nil {
					return false, err
				}
				return strings.Contains(rinfo, "master_link_status:up") &&
					strings.Contains(minfo, "connected_slaves:1") &&
					strings.Contains(minfo, fmt.Sprintf("port=%d,state=online", r.Port())), nil
			})
		}()
		_ = mc.Close()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("redisproc: attach replica %s to master %s: %w", r.Addr(), m.Addr(), err)
		}
	}
	// Every master knows every node, so that a client's view of the
	// cluster is whole.
	for _, m := range c.Servers {
		mc := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
		err := waitFor(ctx, func() (bool, error) {
			info, err := mc.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", 2*len(c.Servers))), err
		})
		_ = mc.Close()
		if err != nil {
			return fmt.Errorf("redisproc: cluster at %s not ok with its replicas: %w", m.Addr(), err)
		}
	}
	return nil
}

// ReplicaOf returns the replica of the master at addr (host:port), or nil.
func (c *ReplicatedCluster) ReplicaOf(addr string) *Server {
	for i, m := range c.Servers {
		if m.Addr() == addr {
			return c.Replicas[i]
		}
	}
	return nil
}

// Stop stops every replica and master.
func (c *ReplicatedCluster) Stop() error {
	var first error
	for _, s := range c.Replicas {
		if err := s.Stop(); err != nil && first == nil {
			first = err
		}
	}
	if err := c.Cluster.Stop(); err != nil && first == nil {
		first = err
	}
	return first
}

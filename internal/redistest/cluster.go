package redistest

import (
	"testing"

	"github.com/redlock-go/redlock/internal/redisproc"
)

// ReplicatedCluster is a Redis Cluster of masters with one replica each
// (redisproc.ReplicatedCluster).
type ReplicatedCluster = redisproc.ReplicatedCluster

// StartReplicatedClusterT starts a cluster of n masters with one replica
// each for a test and stops it when the test ends.
func StartReplicatedClusterT(tb testing.TB, n int) *ReplicatedCluster {
	tb.Helper()
	c, err := redisproc.StartReplicatedCluster(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Stop() })
	return c
}

package redlockotel_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// startRedis starts n redis-server processes on free loopback ports, without
// persistence, and returns a client of each; all are stopped and closed when
// the test ends. (internal/redistest is importable here: Go's internal rule
// is about import paths, and this module's path is under the root's.)
func startRedis(t *testing.T, n int) []redis.UniversalClient {
	t.Helper()
	var clients []redis.UniversalClient
	for _, s := range redistest.Start(t, n) {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	return clients
}

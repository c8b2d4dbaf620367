package fault

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
)

// goRedis is the suite's driver in this module: go-redis, configured as
// safety.md's checklist recommends (ContextTimeoutEnabled, and its optional
// MaxRetries: -1), with short
// timeouts. The modules of the other drivers run the suite on theirs
// (driver/redigo, driver/rueidis).
var goRedis = Driver{
	Name: "go-redis",
	Standalone: func(addr string) (driver.Node, func(), error) {
		return goRedisNode(redis.NewClient(goRedisOptions(addr)))
	},
	Sentinel: func(master string, sentinels []string) (driver.Node, func(), error) {
		o := goRedisOptions("")
		return goRedisNode(redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            master,
			SentinelAddrs:         sentinels,
			ContextTimeoutEnabled: o.ContextTimeoutEnabled,
			DialTimeout:           o.DialTimeout,
			ReadTimeout:           o.ReadTimeout,
			WriteTimeout:          o.WriteTimeout,
			MaxRetries:            o.MaxRetries,
		}))
	},
}

func goRedisNode(c *redis.Client) (driver.Node, func(), error) {
	return goredis.New(c), func() { _ = c.Close() }, nil
}

func TestMain(m *testing.M) { Main(m, goRedis) }

// TestScenarios runs every scenario on go-redis.
func TestScenarios(t *testing.T) { Run(t) }

package fence

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverTime reports the time Redis spent in cmd per call during run
// (INFO commandstats, usec over calls): the fence's cost on the server,
// apart from the round trip and the client's scheduling.
func serverTime(b *testing.B, c *redis.Client, cmd string, run func()) {
	read := func() (usec, calls float64) {
		info := c.Info(context.Background(), "commandstats").Val()
		for line := range strings.Lines(info) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
			if !ok {
				continue
			}
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "usec":
					usec = f
				case "calls":
					calls = f
				}
			}
		}
		return usec, calls
	}
	u0, c0 := read()
	run()
	u1, c1 := read()
	if c1 > c0 {
		b.ReportMetric((u1-u0)/(c1-c0), "server-µs/op")
	}
}

// The cost of a fence on Redis: a fenced write (Set: one EVALSHA that
// reads the fence, writes the value and the fence and counts the write)
// against a plain HSET of the value, and a fenced counter change (Add)
// against a plain HINCRBY, each one round trip on one connection to a
// local redis-server. docs/benchmarks.md has the numbers.
func BenchmarkRedisWrite(b *testing.B) {
	r, c := newRedisB(b)
	ctx := context.Background()
	var token int64 // grows across the runs of b.N
	b.Run("fenced-set", func(b *testing.B) {
		serverTime(b, c, "evalsha", func() {
			for i := range b.N {
				token++
				if err := r.Set(ctx, "bench:set", Token(token), "v"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("plain-hset", func(b *testing.B) {
		serverTime(b, c, "hset", func() {
			for i := range b.N {
				if err := c.HSet(ctx, "bench:plain", "value", "v"+strconv.Itoa(i)).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("fenced-add", func(b *testing.B) {
		serverTime(b, c, "evalsha", func() {
			for range b.N {
				token++
				if _, err := r.Add(ctx, "bench:add", Token(token), 1, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("plain-hincrby", func(b *testing.B) {
		serverTime(b, c, "hincrby", func() {
			for range b.N {
				if err := c.HIncrBy(ctx, "bench:plainadd", "value", 1).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// The cost of a durable fence: a fenced Set on a master with one replica
// on loopback (through a proxy that adds nothing), plain against Durable(1,
// 1s), which waits on the same connection until the replica acknowledged
// it. docs/benchmarks.md has the numbers.
func BenchmarkDurableWrite(b *testing.B) {
	master, _, _, _ := replicated(b)
	c := master.Client()
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"plain", nil}, {"durable", []Option{Durable(1, time.Second)}}} {
		r := NewRedis(c, mode.opts...)
		var token int64
		b.Run("mode="+mode.name, func(b *testing.B) {
			for i := range b.N {
				token++
				s := Sequencer{Lock: "bench", Kind: "plain", Token: token}
				if err := r.Set(ctx, "bench:"+mode.name, s, "v"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

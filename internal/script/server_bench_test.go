package script

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// BenchmarkServerCycle measures what one uncontended acquire-release cycle
// costs the Redis server, as server CPU (INFO cpu, user + system, in µs per
// cycle: the metric server-µs/cycle), next to the floor: SET NX PX and a
// compare-and-delete script. The client's time and the machine's load do
// not enter the metric, only what the server spent, so modes compare within
// one run even on a busy machine:
//
//	go test -run '^$' -bench ServerCycle -benchtime 20000x ./internal/script
func BenchmarkServerCycle(b *testing.B) {
	s := redistest.Start(b, 1)[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	guard := Guard{MaxTTL: 200 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour, RecordTTL: 24 * time.Hour}.Prepared()
	// A fresh server recovers for its first window.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := Acquire(ctx, c, keys("warm"), "v", time.Second, guard, Ack{})
		if err != nil {
			b.Fatal(err)
		}
		if a.OK() {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("node still recovering: %+v", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	modes := []struct {
		name  string
		cycle func(v string) error
	}{
		{"floor", func(v string) error {
			if err := c.SetNX(ctx, "{floor}", v, 10*time.Second).Err(); err != nil {
				return err
			}
			return del.Run(ctx, c, []string{"{floor}"}, v).Err()
		}},
	}
	for _, g := range []struct {
		name string
		g    Guard
	}{{"guard-off", off.Prepared()}, {"guard-on", guard}} {
		k := keys("lock-" + g.name)
		modes = append(modes, struct {
			name  string
			cycle func(v string) error
		}{g.name, func(v string) error {
			a, err := AcquireCall(k, NewLockArgs(k.Lock, v), 10*time.Second, g.g).Acquire(ctx, c, Ack{})
			if err != nil {
				return err
			}
			if !a.OK() {
				return errNotTaken(a)
			}
			_, err = ReleaseCall(NewLockArgs(k.Lock, v), true, false).Release(ctx, c)
			return err
		}})
	}
	for _, m := range modes {
		b.Run("mode="+m.name, func(b *testing.B) {
			i := 0
			before := serverCPU(b, c)
			for b.Loop() {
				i++
				if err := m.cycle("v" + strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(serverCPU(b, c)-before)/float64(b.N), "server-µs/cycle")
		})
	}
}

type errNotTaken Acquired

func (e errNotTaken) Error() string { return "not taken: status " + strconv.Itoa(int(e.Status)) }

// serverCPU is the server's CPU time so far (INFO cpu), in µs.
func serverCPU(tb testing.TB, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		sec, frac, _ := strings.Cut(v, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err1 != nil || err2 != nil {
			tb.Fatalf("INFO cpu: %q", line)
		}
		total += s*1e6 + us
	}
	return total
}

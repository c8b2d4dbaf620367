package redlock_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// fencedSet writes a segment's remaining stock only if the writer's fencing
// token is above every token the segment has seen: a buyer that lost its
// segment lock (paused past its TTL) cannot overwrite the next holder's
// count.
var fencedSet = redis.NewScript(`
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) <= last then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1`)

// A flash sale of 100 items split into 4 segments of 25, each segment's
// remaining count kept by the application in Redis and guarded by its own
// lock, so that four buyers sell at once. Any takes whichever segment
// is free; a segment that runs dry is dropped from the names the buyers
// pass, which is the application's business, not the library's.
func ExampleClient_Any() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	store := nodes[0] // the application's data; any Redis will do
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const segments, stock = 4, 100
	var (
		mu   sync.Mutex
		live []string // the segments that may still have stock
	)
	for i := range segments {
		name := fmt.Sprintf("sale:item-1:segment-%d", i)
		live = append(live, name)
		if err := store.Set(ctx, "stock:"+name, stock/segments, 0).Err(); err != nil {
			log.Fatal(err)
		}
	}
	liveNames := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(live)
	}
	dry := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		live = slices.DeleteFunc(live, func(n string) bool { return n == name })
	}

	var sold, refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 { // buyers
		wg.Go(func() {
			for {
				names := liveNames()
				if len(names) == 0 {
					return // sold out
				}
				lock, err := c.Any(names...).Obtain(ctx, 10*time.Second)
				if err != nil {
					log.Fatal(err)
				}
				seg := lock.Name() // the segment we got
				left, err := store.Get(ctx, "stock:"+seg).Int()
				if err != nil {
					log.Fatal(err)
				}
				if left == 0 {
					dry(seg)
				} else {
					ok, err := fencedSet.Run(ctx, store, []string{"stock:" + seg, "token:" + seg}, lock.Token(), left-1).Int()
					if err != nil {
						log.Fatal(err)
					}
					if ok == 1 {
						sold.Add(1)
					} else {
						refused.Add(1)
					}
				}
				if err := lock.Release(ctx); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("sold %d of %d, %d stale writes refused\n", sold.Load(), stock, refused.Load())
	// Output: sold 100 of 100, 0 stale writes refused
}

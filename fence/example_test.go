package fence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

// A holder that lost its lock (token 41) writes after the next holder (42):
// refused.
func ExampleRedis_Set() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()

	fmt.Println(r.Set(ctx, "account:7", 42, "balance=90"))
	err := r.Set(ctx, "account:7", 41, "balance=150")
	fmt.Println(errors.Is(err, fence.ErrStale), err)
	// Output:
	// <nil>
	// true fence: account:7: stale token 41: the resource has seen token 42
}

// A read-modify-write reads with its token: a holder that read earlier with
// an older token can no longer write.
func ExampleRedis_Get() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()
	_ = r.Set(ctx, "doc", 10, "v1")

	v, _, _ := r.Get(ctx, "doc", 11) // holder 11 reads, then stalls
	fmt.Println(v)
	v, _, _ = r.Get(ctx, "doc", 12) // holder 12 reads and writes
	_ = r.Set(ctx, "doc", 12, v+"+12")
	fmt.Println(r.Set(ctx, "doc", 11, v+"+11")) // holder 11 wakes up
	// Output:
	// v1
	// fence: doc: stale token 11: the resource has seen token 12
}

// A stock decremented by current holders only, never below zero.
func ExampleRedis_Add() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()

	_, _ = r.Add(ctx, "stock:sku1", 1, 2, fence.NoFloor) // two in stock
	for token := int64(2); token <= 4; token++ {
		n, err := r.Add(ctx, "stock:sku1", token, -1, 0)
		fmt.Println(n, err)
	}
	// Output:
	// 1 <nil>
	// 0 <nil>
	// 0 fence: stock:sku1: counter 0-1 would be below its floor 0
}

// The caller's own script, run only under a current token. With Redis
// Cluster, the fence's key and the script's keys share a hash tag.
func ExampleRedis_Eval() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()
	const enqueue = `return redis.call('RPUSH', KEYS[1], ARGV[1])`

	n, err := r.Eval(ctx, "{jobs}:fence", 7, enqueue, []string{"{jobs}:queue"}, "job-a")
	fmt.Println(n, err)
	_, err = r.Eval(ctx, "{jobs}:fence", 6, enqueue, []string{"{jobs}:queue"}, "job-b")
	fmt.Println(err)
	// Output:
	// 1 <nil>
	// fence: {jobs}:fence: stale token 6: the resource has seen token 7
}

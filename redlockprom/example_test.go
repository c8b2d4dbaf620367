package redlockprom_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlockprom"
)

// The Hook's metrics, registered on a registry of one's own (serve it with
// promhttp.HandlerFor), count what a Client does.
func ExampleNew() {
	// Three local redis-server processes; in production, independent Redis
	// deployments.
	nodes, stop := redistest.ExampleNodes(3)
	defer stop()

	reg := prometheus.NewRegistry()
	hook, err := redlockprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	c, err := redlock.New(nodes, redlock.WithHook(hook), redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "report:weekly", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	_ = lock.Release(ctx)

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "redlock_acquire_total", "redlock_release_total", "redlock_held_locks":
			for _, m := range f.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				fmt.Printf("%s{%s} %v\n", f.GetName(), strings.Join(labels, ","), m.GetCounter().GetValue()+m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// redlock_acquire_total{lock_kind="plain",result="obtained"} 1
	// redlock_held_locks{lock_kind="permit"} 0
	// redlock_held_locks{lock_kind="plain"} 0
	// redlock_held_locks{lock_kind="read"} 0
	// redlock_held_locks{lock_kind="reentrant"} 0
	// redlock_held_locks{lock_kind="write"} 0
	// redlock_release_total{lock_kind="plain",result="ok"} 1
}

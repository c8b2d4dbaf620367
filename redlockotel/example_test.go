package redlockotel_test

import (
	"context"
	"fmt"
	"log"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlockotel"
)

// The Hook makes a span of each obtain, refresh, release and loss, and
// metrics of them, with the providers it is given (default: the global
// ones). Here the spans go to a recorder; in production, to an exporter.
func ExampleNew() {
	// Three local redis-server processes; in production, independent Redis
	// deployments.
	nodes, stop := redistest.ExampleNodes(3)
	defer stop()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())

	hook, err := redlockotel.New(redlockotel.WithTracerProvider(tp), redlockotel.WithMeterProvider(mp))
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
	if err := lock.Refresh(ctx, time.Minute); err != nil {
		log.Fatal(err)
	}
	_ = lock.Release(ctx)

	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "redlock.outcome" {
				fmt.Println(s.Name(), a.Value.AsString())
			}
		}
	}
	// Output:
	// redlock.obtain obtained
	// redlock.refresh ok
	// redlock.release ok
}

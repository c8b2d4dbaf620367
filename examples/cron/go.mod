module github.com/redlock-go/redlock/examples/cron

go 1.26.0

replace github.com/redlock-go/redlock => ../..

require (
	github.com/redis/go-redis/v9 v9.16.0
	github.com/redlock-go/redlock v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
)

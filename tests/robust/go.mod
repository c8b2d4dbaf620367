module github.com/redlock-go/redlock/tests/robust

go 1.26.0

replace github.com/redlock-go/redlock => ../..

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/redis/go-redis/v9 v9.16.0
	github.com/redlock-go/redlock v0.0.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
)

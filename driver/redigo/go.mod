module github.com/redlock-go/redlock/driver/redigo

go 1.26.0

replace github.com/redlock-go/redlock => ../..

require (
	github.com/gomodule/redigo v1.9.3
	github.com/redlock-go/redlock v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

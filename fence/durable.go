package fence

import (
	"errors"
	"time"
)

// ErrNotDurable is matched by the error of a Redis write made with Durable
// when the replicas asked for did not acknowledge it in time.
var ErrNotDurable = errors.New("fence: write not acknowledged by the replicas (Durable)")

// Durable makes every write of a Redis wait until replicas replicas
// acknowledged it, at most timeout.
func Durable(replicas int, timeout time.Duration) Option {
	return optionFunc(func(o *options) { o.ack = durable{replicas, timeout} })
}

// durable is Durable's setting; zero replicas: writes do not wait.
type durable struct {
	replicas int
	timeout  time.Duration
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// open returns a go-redis client for the node, with context deadlines
// honoured and timeout as the dial timeout. The caller must close it.
func (s *nodeSpec) open(timeout time.Duration) redis.UniversalClient {
	// A Sentinel and a Cluster node share these; a standalone node has its
	// options from its URL.
	u := &redis.UniversalOptions{
		Addrs:                 s.addrs,
		MasterName:            s.master,
		SentinelUsername:      s.sentinelUser,
		SentinelPassword:      s.sentinelPass,
		Username:              s.username,
		Password:              s.password,
		TLSConfig:             s.tls,
		DialTimeout:           timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	}
	switch s.kind {
	case sentinel:
		return redis.NewFailoverClient(u.Failover())
	case cluster:
		return redis.NewClusterClient(u.Cluster())
	}
	o := *s.opts
	if o.DialTimeout == 0 {
		o.DialTimeout = timeout
	}
	return redis.NewClient(&o)
}

// sentinelClient returns a client for the i-th sentinel of a Sentinel
// node. The caller must close it.
func (s *nodeSpec) sentinelClient(i int, timeout time.Duration) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{
		Addr:                  s.addrs[i],
		Username:              s.sentinelUser,
		Password:              s.sentinelPass,
		TLSConfig:             s.tls,
		DialTimeout:           timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
}

// conn is an open node.
type conn struct {
	spec *nodeSpec
	rc   redis.UniversalClient
}

func openAll(specs []*nodeSpec, timeout time.Duration) []conn {
	conns := make([]conn, len(specs))
	for i, s := range specs {
		conns[i] = conn{spec: s, rc: s.open(timeout)}
	}
	return conns
}

func closeAll(conns []conn) {
	for _, c := range conns {
		_ = c.rc.Close()
	}
}

func clients(conns []conn) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(conns))
	for i, c := range conns {
		out[i] = c.rc
	}
	return out
}

// connect opens the nodes and a Client on them, and checks that a quorum
// of them answers. When it cannot, it has said why, closed what it opened,
// and returns the command's exit code (exitUsage: options that New
// refuses; exitUnavailable: the nodes do not answer). Otherwise the caller
// must call done, which closes the Client and the nodes.
//
// next, when given, are the next set of nodes of a move: the Client runs in
// joint configuration (docs/reconfiguration.md).
func (cmd *invocation) connect(ctx context.Context, specs, next []*nodeSpec, timeout time.Duration, opts []redlock.Option) (c *redlock.Client, done func(), code int) {
	conns := openAll(specs, timeout)
	nextConns := openAll(next, timeout)
	c, err := redlock.New(clients(conns), append(opts, nextOption(nextConns)...)...)
	if err != nil {
		closeAll(conns)
		closeAll(nextConns)
		return nil, nil, cmd.fail(exitUsage, "%v", err)
	}
	done = func() {
		_ = c.Close()
		closeAll(conns)
		closeAll(nextConns)
	}
	if err := reachable(ctx, append(conns, nextConns...), timeout); err != nil {
		done()
		if authFailed(err) {
			return nil, nil, cmd.fail(exitAuth, "nodes refused the credentials: %v", err)
		}
		return nil, nil, cmd.fail(exitUnavailable, "nodes unreachable: %v", err)
	}
	return c, done, 0
}

// pingAll pings every node in parallel, each within timeout, and returns
// each node's error.
func pingAll(ctx context.Context, conns []conn, timeout time.Duration) []error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = c.rc.Ping(pctx).Err()
		})
	}
	wg.Wait()
	return errs
}

// reachable pings the nodes and, when fewer than a quorum answer, returns
// an error that lists each failed node; it wraps each node's error, so
// that authFailed finds a refusal of the credentials.
func reachable(ctx context.Context, conns []conn, timeout time.Duration) error {
	errs := pingAll(ctx, conns, timeout)
	var bad []string
	var failed []error
	for i, err := range errs {
		if err != nil {
			err = nodeErr(err)
			bad = append(bad, fmt.Sprintf("node %d (%s): %v", i, conns[i].spec, err))
			failed = append(failed, err)
		}
	}
	need := len(conns)/2 + 1
	if len(conns)-len(bad) >= need {
		return nil
	}
	return &nodesError{
		msg:  fmt.Sprintf("%d of %d nodes answered, %d needed: %s", len(conns)-len(bad), len(conns), need, strings.Join(bad, "; ")),
		errs: failed,
	}
}

// nodesError is a message about several nodes that wraps each one's error.
type nodesError struct {
	msg  string
	errs []error
}

func (e *nodesError) Error() string   { return e.msg }
func (e *nodesError) Unwrap() []error { return e.errs }

// nodeErr shortens the error of a request to a node, and says when the
// node refused the credentials.
func nodeErr(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("no answer in time")
	case authFailed(err):
		return fmt.Errorf("authentication failed: %w", err)
	}
	return err
}

// authFailed reports whether a node refused the credentials: WRONGPASS (a
// wrong user or password), NOAUTH (none given, one needed), or a password
// given to a server that has none. The server says which in the error
// code that starts its reply.
func authFailed(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.HasPrefix(msg, "ERR AUTH") && strings.Contains(msg, "without any password configured")
}

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
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
	var pinged func()
	done = func() {
		_ = c.Close()
		closeAll(conns)
		closeAll(nextConns)
		if pinged != nil {
			pinged() // the PINGs that a quorum did not wait for
		}
	}
	all, _, _ := joinConns(conns, nextConns) // the library's order of the nodes
	cmd.labels = make([]string, len(all))
	for i, c := range all {
		cmd.labels[i] = c.spec.label
	}
	pinged, err = reachable(ctx, append(conns, nextConns...), timeout)
	if err != nil {
		done()
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, nil, cmd.fail(exitUsage, "%v", err)
		}
		if authFailed(err) {
			return nil, nil, cmd.fail(exitAuth, "nodes refused the credentials: %v", err)
		}
		return nil, nil, cmd.fail(exitUnavailable, "nodes unreachable: %v", err)
	}
	return c, done, 0
}

// pings are the PINGs of reachable: each node's error once it answered
// or failed.
type pings struct {
	mu   sync.Mutex
	errs []error
	done []bool
	wg   sync.WaitGroup
}

// pingQuorum pings every node in parallel, each within timeout, and
// returns as soon as need of them answered, or once every node answered
// or failed, as an acquire round decides at a quorum: one frozen node does
// not hold up the others. The PINGs still under way go on; the caller must
// close the nodes' clients, which ends them, then call wait.
func pingQuorum(ctx context.Context, conns []conn, timeout time.Duration, need int) (errs []error, answered []bool, wait func()) {
	p := &pings{errs: make([]error, len(conns)), done: make([]bool, len(conns))}
	settled := make(chan struct{}, len(conns))
	for i, c := range conns {
		p.wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := c.rc.Ping(pctx).Err()
			p.mu.Lock()
			p.errs[i], p.done[i] = err, true
			p.mu.Unlock()
			settled <- struct{}{}
		})
	}
	ok := 0
	for range conns {
		<-settled
		p.mu.Lock()
		ok = 0
		for i, d := range p.done {
			if d && p.errs[i] == nil {
				ok++
			}
		}
		p.mu.Unlock()
		if ok >= need {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...), append([]bool(nil), p.done...), p.wg.Wait
}

// reachable pings the nodes and, when fewer than a quorum answer, returns
// an error that lists each failed node; it wraps each node's error, so
// that authFailed finds a refusal of the credentials. It returns at a
// quorum (pingQuorum): the caller must close the nodes' clients, then call
// wait.
func reachable(ctx context.Context, conns []conn, timeout time.Duration) (wait func(), err error) {
	need := len(conns)/2 + 1
	errs, answered, wait := pingQuorum(ctx, conns, timeout, need)
	for i, err := range errs {
		if badDB(err) {
			return wait, usagef("node %d (%s): %v: the database index in its URL is not one the server has (its \"databases\" setting); a configuration error, not a node that is down", i, conns[i].spec, err)
		}
	}
	var bad []string
	var failed []error
	for i, err := range errs {
		if answered[i] && err != nil {
			err = nodeErr(explainTLS(ctx, conns[i].spec.tlsAddrs(), err, timeout))
			bad = append(bad, fmt.Sprintf("node %d (%s): %v", i, conns[i].spec, err))
			failed = append(failed, err)
		}
	}
	if len(conns)-len(bad) >= need {
		return wait, nil
	}
	return wait, &nodesError{
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
	case badDB(err):
		return fmt.Errorf("the server has no database of the index in the URL (a configuration error): %w", err)
	}
	return explain(err, nil)
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

// badDB reports whether a node refused the database index of its URL
// (SELECT): a mistake in the URL, which no retry mends.
func badDB(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "ERR DB index is out of range") || strings.HasPrefix(msg, "ERR invalid DB index")
}

// tlsNodes are the addresses a node reaches over TLS, and the TLS
// configuration it reaches them with: no addresses without TLS.
type tlsNodes struct {
	addrs []string
	cfg   *tls.Config
}

// tlsAddrs are the addresses the node reaches over TLS: none without TLS.
func (s *nodeSpec) tlsAddrs() tlsNodes {
	switch {
	case s.kind == standalone && s.opts.TLSConfig != nil:
		return tlsNodes{[]string{s.opts.Addr}, s.opts.TLSConfig}
	case s.kind != standalone && s.tls != nil:
		return tlsNodes{s.addrs, s.tls}
	}
	return tlsNodes{}
}

// tlsAddrsOf is tlsAddrs for a client of one server.
func tlsAddrsOf(o *redis.Options) tlsNodes {
	if o.TLSConfig == nil || o.Addr == "FailoverClient" {
		return tlsNodes{}
	}
	return tlsNodes{[]string{o.Addr}, o.TLSConfig}
}

// explainTLS says that the TLS handshake failed, when err, of a request to
// a node reached over TLS (to), comes from it: a TLS error; a connection
// reset by a server that refuses the client's certificate (tlsRefusal);
// or a request that timed out at a server that answers a plain PING (a
// plain Redis port takes the handshake as an unfinished command and
// waits, so the client sees only a timeout). Other errors are returned as
// they are.
func explainTLS(ctx context.Context, to tlsNodes, err error, timeout time.Duration) error {
	if err == nil || len(to.addrs) == 0 {
		return err
	}
	var (
		header tls.RecordHeaderError
		alert  tls.AlertError
		verify *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &verify):
		return fmt.Errorf("TLS handshake failed: %w (a server certificate of a private CA needs --tls-ca or the URL's tls_ca=)", err)
	case clientCertRefused(err):
		return fmt.Errorf("TLS handshake failed: %w (a server that authenticates clients, tls-auth-clients yes, needs a client certificate that its CA signed: --tls-cert and --tls-key, or the URL's tls_cert= and tls_key=)", err)
	case errors.As(err, &header) || errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls: "):
		return fmt.Errorf("TLS handshake failed: %w", err)
	}
	if errors.Is(err, syscall.ECONNRESET) {
		for _, a := range to.addrs {
			if refused := tlsRefusal(context.WithoutCancel(ctx), a, to.cfg, timeout); refused != nil {
				return fmt.Errorf("TLS handshake failed: %w, after which the request saw: %w (a server that authenticates clients, tls-auth-clients yes, needs a client certificate that its CA signed: --tls-cert and --tls-key, or the URL's tls_cert= and tls_key=)", refused, err)
			}
		}
		return err
	}
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		return err
	}
	for _, a := range to.addrs {
		if plainRedis(context.WithoutCancel(ctx), a, timeout) {
			return fmt.Errorf("TLS handshake failed: no answer to it in time, but %s answers a plain PING: it serves Redis without TLS (use redis://, or the server's TLS port)", a)
		}
	}
	return err
}

// clientCertRefused reports whether a server's TLS alert refused the
// client's certificate, or its lack of one: crypto/tls reports a received
// alert as a *net.OpError "remote error" around an unexported type, so
// the alert's text (RFC 8446, 6.2) is what tells it.
func clientCertRefused(err error) bool {
	msg := err.Error()
	for _, a := range []string{"certificate required", "bad certificate", "unknown certificate authority", "certificate unknown", "handshake failure"} {
		if strings.Contains(msg, "remote error: tls: "+a) {
			return true
		}
	}
	return false
}

// tlsRefusal makes a TLS handshake with addr and waits, up to timeout,
// for the server's verdict on the client's certificate, and returns the
// alert of a refusal, or nil. With TLS 1.3 the client's handshake ends
// before the server has checked its certificate: the server refuses it
// afterwards, with an alert and a close, and a request written before the
// alert came in can see only the connection reset that followed it
// (TestTLSClientAuthentication, under -race). The probe writes nothing,
// so it reads the alert.
func tlsRefusal(ctx context.Context, addr string, cfg *tls.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if clientCertRefused(err) { // TLS 1.2 refuses within the handshake
			return err
		}
		return nil
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(deadline)
	if _, err := conn.Read(make([]byte, 1)); err != nil && clientCertRefused(err) {
		return err
	}
	return nil
}

// plainRedis reports whether addr answers PING in plain RESP within
// timeout (at most a second).
func plainRedis(ctx context.Context, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, min(timeout, time.Second))
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return false
	}
	return b[0] == '+' || b[0] == '-'
}

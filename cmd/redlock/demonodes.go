package main

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redisproc"
)

// demoNode is one of the demo's local Redis nodes: a real redis-server
// process, or an in-process Redis-compatible server when redis-server is
// not installed.
type demoNode interface {
	Describe() string
	Client() *redis.Client
	Kill() error // a crash: the node is gone
	// CanFreeze reports whether Pause works; NoFreeze says why not.
	CanFreeze() bool
	NoFreeze() string
	Pause() error
	Resume() error
	Stop() error
}

// startDemoNodes starts n nodes: real redis-server processes when the
// binary is on the PATH (unless inProcess), otherwise in-process servers.
// real reports which.
func startDemoNodes(n int, inProcess bool) (nodes []demoNode, real bool, err error) {
	stopAll := func() {
		for _, nd := range nodes {
			_ = nd.Stop()
		}
	}
	real = !inProcessNodes(inProcess)
	for range n {
		var nd demoNode
		if real {
			s, err := redisproc.StartServer(redisproc.Options{})
			if err != nil {
				stopAll()
				return nil, real, err
			}
			nd = processNode{s}
		} else {
			m := miniredis.NewMiniRedis()
			// miniredis leaves TTLs alone unless told: a lock key that a
			// failed attempt left on a node would never expire, and would
			// block every buyer for the rest of the sale.
			m.ClockTTL(true)
			if err := m.Start(); err != nil {
				stopAll()
				return nil, real, fmt.Errorf("start an in-process server: %w", err)
			}
			nd = inProcessNode{m}
		}
		nodes = append(nodes, nd)
	}
	return nodes, real, nil
}

// inProcessNodes reports whether the demo's own nodes run in this process:
// when asked (--in-process), or when redis-server is not on the PATH.
func inProcessNodes(inProcess bool) bool {
	_, err := exec.LookPath("redis-server")
	return inProcess || err != nil
}

type processNode struct{ *redisproc.Server }

func (p processNode) CanFreeze() bool { return redisproc.FreezeSupported() }
func (p processNode) NoFreeze() string {
	return "no node frozen: " + runtime.GOOS + " has no SIGSTOP to freeze a process"
}

func (p processNode) Describe() string {
	return fmt.Sprintf("redis-server pid %d on %s", p.Pid(), p.Addr())
}

// inProcessNode is a miniredis server in this process, with keys that
// expire by the wall clock as on redis-server. It runs the lock scripts, but
// has no INFO server (the restart guard needs it), and cannot be frozen.
type inProcessNode struct{ m *miniredis.Miniredis }

func (n inProcessNode) Describe() string { return "in-process server (miniredis) on " + n.m.Addr() }
func (n inProcessNode) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
}
func (n inProcessNode) Kill() error      { n.m.Close(); return nil }
func (n inProcessNode) CanFreeze() bool  { return false }
func (n inProcessNode) NoFreeze() string { return "an in-process server cannot be frozen" }
func (n inProcessNode) Pause() error     { return errors.New(n.NoFreeze()) }
func (n inProcessNode) Resume() error    { return nil }
func (n inProcessNode) Stop() error      { n.m.Close(); return nil }

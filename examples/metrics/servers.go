package main

import (
	"errors"

	"github.com/redlock-go/redlock/internal/redisproc"
)

// servers are local redis-server processes, without persistence, on free
// loopback ports.
type servers struct {
	addrs []string
	procs []*redisproc.Server
}

// startServers starts n redis-server processes; the caller must call stop.
func startServers(n int) (*servers, error) {
	s := &servers{}
	for range n {
		p, err := redisproc.StartServer(redisproc.Options{})
		if errors.Is(err, redisproc.ErrNotInstalled) {
			s.stop()
			return nil, errors.New("redis-server is not on the PATH: install it, or give -nodes")
		}
		if err != nil {
			s.stop()
			return nil, err
		}
		s.procs = append(s.procs, p)
		s.addrs = append(s.addrs, p.Addr())
	}
	return s, nil
}

// stop stops every server; it is safe to call more than once.
func (s *servers) stop() {
	for _, p := range s.procs {
		_ = p.Stop()
	}
}

// Package faultproxy is a TCP proxy on 127.0.0.1 that injects network
// faults between a client and one server: added latency, a blackhole
// (bytes are accepted and dropped, nothing comes back), lost replies (the
// server gets every request, the client hears nothing: a one-way
// partition), connection resets and a change of server (a name re-pointed). It is for the fault-injection suite (tests/fault).
//
// Every Proxy is owned by whoever started it: Close stops the listener and
// every forwarding goroutine, and waits for them.
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from its own loopback address to a target.
// It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	latency   time.Duration
	blackhole bool // both directions
	noReplies bool // server to client only
	conns     map[net.Conn]struct{}
	closed    bool

	wg sync.WaitGroup
}

// New starts a proxy on a free port of 127.0.0.1 that forwards to target.
// The caller must call Close.
func New(target string) (*Proxy, error) { return NewAt("127.0.0.1:0", target) }

// NewAt starts a proxy that listens at addr (host:port, a loopback
// address) and forwards to target. The caller must call Close.
func NewAt(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port; clients dial it instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk of bytes, in both directions, by d. Zero
// removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// SetBlackhole makes the proxy drop every byte in both directions while on,
// keeping connections open: a partition that TCP does not notice. New
// connections are accepted and hang.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	p.mu.Unlock()
}

// SetDropReplies makes the proxy pass every byte to the server but drop
// every byte coming back while on: requests take effect, and their
// clients never hear so. Connections stay open.
func (p *Proxy) SetDropReplies(on bool) {
	p.mu.Lock()
	p.noReplies = on
	p.mu.Unlock()
}

// Reset closes every open connection (the client sees a reset or EOF); new
// connections are accepted as usual.
func (p *Proxy) Reset() {
	p.mu.Lock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // send RST, not FIN
		}
		_ = c.Close()
	}
	p.mu.Unlock()
}

// SetTarget points the proxy at another server: new connections go to
// target; open ones stay with the old one until Reset closes them (a DNS
// name or a load balancer pointed elsewhere).
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Heal removes latency, the blackhole and lost replies.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.latency, p.blackhole, p.noReplies = 0, false, false
	p.mu.Unlock()
}

// Close stops the proxy, closes its connections and waits for its
// goroutines. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// state is the current latency, and whether bytes going toServer (or
// back) are dropped.
func (p *Proxy) state(toServer bool) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency, p.blackhole || (!toServer && p.noReplies)
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	out, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(in, out) {
		_ = in.Close()
		_ = out.Close()
		return
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(out, in, true) }()
	go func() { defer pipes.Done(); p.pipe(in, out, false) }()
	pipes.Wait()
	p.untrack(in, out)
}

// pipe copies src to dst (toServer: client to server), applying the
// current faults to each chunk. When either side fails, it closes both so
// that the other direction ends too.
func (p *Proxy) pipe(dst, src net.Conn, toServer bool) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			lat, hole := p.state(toServer)
			if lat > 0 {
				t := time.NewTimer(lat)
				<-t.C
			}
			if _, hole2 := p.state(toServer); !hole && !hole2 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF or a closed connection
		}
	}
}

package drivertest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Dialer opens a connection to addr as net.Dialer's DialContext does: the
// signature of go-redis's Options.Dialer and of redigo's DialContextFunc;
// rueidis's ClientOption.DialCtxFn wraps it.
type Dialer = func(ctx context.Context, network, addr string) (net.Conn, error)

// movedName is the host name the AddressChange part gives its node: no
// resolver knows it (.invalid is reserved, RFC 2606), so only the part's
// dialer can reach it.
const movedName = "redis-0.redis.drivertest.invalid"

// The two loopback addresses the node has, before and after it moves.
// Linux routes all of 127.0.0.0/8 to the loopback interface.
const (
	firstIP  = "127.0.0.2"
	secondIP = "127.0.0.3"
)

// resolver maps movedName to the node's current address, as a DNS server
// does for a Kubernetes Pod's stable name (a StatefulSet's Pod behind a
// headless Service) whose IP changes when the Pod is recreated. Its dial
// is the Dialer the part gives the driver; it records every address the
// driver asked for and every IP it connected to.
type resolver struct {
	mu     sync.Mutex
	name   string   // movedName:port
	ip     string   // where name points now
	asked  []string // the addresses the driver dialed
	dialed map[string]int
}

func (r *resolver) point(ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ip = ip
}

func (r *resolver) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.asked = append(r.asked, addr)
	ip := r.ip
	known := addr == r.name
	r.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("drivertest: the driver dialed %q, not the name %q it was given", addr, r.name)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, net.JoinHostPort(ip, port))
	if err == nil {
		r.mu.Lock()
		r.dialed[ip]++
		r.mu.Unlock()
	}
	return c, err
}

// report is what the driver asked for and what it reached.
func (r *resolver) report() (asked []string, dialed map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dialed = make(map[string]int, len(r.dialed))
	for ip, n := range r.dialed {
		dialed[ip] = n
	}
	return append([]string(nil), r.asked...), dialed
}

// canBind skips the test where the loopback addresses cannot be bound
// (systems other than Linux may have 127.0.0.1 only).
func canBind(t *testing.T, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Skipf("cannot listen on %s, which the node moves to: %v", ip, err)
		}
		_ = l.Close()
	}
}

// A node named by a host name comes back on a new IP address after a
// restart, with its data (AOF, appendfsync always), as a Kubernetes Pod
// of a StatefulSet does: the driver dials the name again, never the old
// IP, and reaches the node at its new address. Its requests, its
// Notifier's subscriptions and a redlock Client's refresh, release and
// next obtain all reach the node at the new address.
func testAddressChange(t *testing.T, d Driver) {
	canBind(t, firstIP, secondIP)
	persistent := []string{"--appendonly", "yes", "--appendfsync", "always"}
	s := redistest.Start(t, 1, redistest.Options{Host: firstIP, Args: persistent})[0]
	r := &resolver{name: net.JoinHostPort(movedName, strconv.Itoa(s.Port())), ip: firstIP, dialed: map[string]int{}}
	n := d.Dialing(t, r.name, r.dial)
	// Two more nodes, so that a lock has a quorum while the moved one is
	// down; the moved node is node 0.
	others := redistest.Start(t, 2)
	nodes := []driver.Node{n, d.Standalone(t, others[0].Addr()), d.Standalone(t, others[1].Addr())}

	key := unique("moved")
	do(t, n, "SET", key, "kept")
	hub := n.Notifier()
	defer hub.Close()
	ch := unique("moved-channel")
	w := driver.NewTrackingWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("the subscription was not confirmed")
	}
	defer hub.Unsubscribe(ch, w)

	c := newClient(t, nodes)
	ctx := ctxFor(t, 6*patience)
	name := unique("moved-lock")
	lock, err := c.Obtain(ctx, name, 20*time.Second)
	must(t, "Obtain", err)
	lk := lockKey(t, name)
	eventually(t, "the lock's key on the node before it moves", patience, func() bool {
		return exists(n, lk)
	})
	if _, dialed := r.report(); dialed[firstIP] == 0 {
		t.Fatalf("the driver reached the node without the dialer it was given (dials by IP: %v)", dialed)
	}

	must(t, "move the node to "+secondIP, s.MoveTo(secondIP))
	r.point(secondIP)
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(firstIP, strconv.Itoa(s.Port())), time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("something still listens at the node's old address %s", firstIP)
	}

	// Requests: the first ones may fail on connections to the old
	// address; then the driver dials the name again.
	eventually(t, "a request answered from the new address", patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "GET", key)
		return err == nil && v == "kept"
	})
	asked, dialed := r.report()
	if dialed[secondIP] == 0 {
		t.Errorf("no connection to the new address %s (dials by IP: %v)", secondIP, dialed)
	}
	for _, a := range asked {
		if a != r.name {
			t.Errorf("the driver dialed %q, not the name %q it was given", a, r.name)
			break
		}
	}

	// The Notifier subscribes again at the new address.
	publish := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = n.Do(ctx, "PUBLISH", ch, "released")
	}
	if !hears(t, w, ch, publish) {
		t.Errorf("no message reached the waiter within %v of the move: not subscribed again at the new address", patience)
	}

	// The lock's key survived the move (AOF); a refresh and the release
	// reach the node at its new address, and so does the next obtain.
	if !exists(n, lk) {
		t.Fatal("the lock's key did not survive the move (AOF with appendfsync always)")
	}
	must(t, "Refresh after the move", lock.Refresh(ctx, time.Minute))
	eventually(t, "the refresh on the moved node", patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "PTTL", lk)
		ms, ok := v.(int64)
		return err == nil && ok && ms > (40*time.Second).Milliseconds()
	})
	must(t, "Release after the move", lock.Release(ctx))
	eventually(t, "the release on the moved node", patience, func() bool { return !exists(n, lk) })
	again, err := c.Obtain(ctx, name, time.Minute)
	must(t, "Obtain after the move", err)
	if again.Token() <= lock.Token() {
		t.Errorf("token %d after the move, want above %d", again.Token(), lock.Token())
	}
	eventually(t, "the next obtain on the moved node", patience, func() bool { return exists(n, lk) })
	must(t, "Release", again.Release(ctx))
}

// exists reports whether key exists on n; false on an error.
func exists(n driver.Node, key string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := n.Do(ctx, "EXISTS", key)
	return err == nil && v == int64(1)
}

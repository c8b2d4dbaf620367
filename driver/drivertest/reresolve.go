package drivertest

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

// reresolveName is the name the Reresolve part's DNS server answers.
const reresolveName = "redis-0.redis.drivertest.test"

// reresolvedNode starts the Reresolve part's node: a redis-server at the
// new address, a proxy to it at the old one, the DNS server that resolves
// the node's name to the old one, and the driver's node, whose dial
// resolves the name with that server and records where it connected.
func reresolvedNode(t *testing.T, d Driver) (driver.Node, *faultproxy.Proxy, *dnsServer, *remotes) {
	canBind(t, firstIP, secondIP)
	s := redistest.Start(t, 1, redistest.Options{Host: secondIP})[0]
	port := strconv.Itoa(s.Port())
	old, err := faultproxy.NewAt(net.JoinHostPort(firstIP, port), s.Addr())
	if err != nil {
		t.Skipf("cannot listen at the old address %s:%s: %v", firstIP, port, err)
	}
	t.Cleanup(func() { _ = old.Close() })
	dns := startDNS(t, reresolveName, firstIP)
	seen := &remotes{by: map[string]int{}}
	dial := seen.wrap(&net.Dialer{Resolver: dns.resolver(), Timeout: 2 * time.Second})
	return d.Dialing(t, net.JoinHostPort(reresolveName, port), dial), old, dns, seen
}

// remotes records the IP address of every connection a dial opened.
type remotes struct {
	mu sync.Mutex
	by map[string]int
}

func (r *remotes) wrap(d *net.Dialer) Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
				r.mu.Lock()
				r.by[ta.IP.String()]++
				r.mu.Unlock()
			}
		}
		return c, err
	}
}

func (r *remotes) count(ip string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[ip]
}

// A node named by a host name that a DNS server resolves, whose A record
// changes to another address while the old one becomes a blackhole:
// nothing answers there and nothing is refused, as when a Pod's IP is
// handed to nothing after the Pod moved. The driver resolves the name
// through Go's resolver asking the test's own DNS server (every answer
// with TTL 0), and must leave the connections it holds to the old
// address (they hang: only its timeouts end them) and reach the node at
// the new one: its requests, its Notifier's subscriptions, and a redlock
// Client's refresh, release and next obtain.
//
// The node is one redis-server at the new address (127.0.0.3); the old
// address (127.0.0.2) is a TCP proxy to it until the move, then a
// blackhole that accepts connections and drops every byte both ways (a
// firewall's drop would refuse the handshake too: this machine's kernel
// has none to use; either way no answer and no reset).
func testReresolve(t *testing.T, d Driver) {
	n, old, dns, seen := reresolvedNode(t, d)
	others := redistest.Start(t, 2)
	nodes := []driver.Node{n, d.Standalone(t, others[0].Addr()), d.Standalone(t, others[1].Addr())}

	key := unique("reresolved")
	do(t, n, "SET", key, "kept")
	if dns.answered() == 0 || seen.count(firstIP) == 0 {
		t.Fatalf("the driver reached the node without resolving its name (A queries %d, connections to %s: %d)", dns.answered(), firstIP, seen.count(firstIP))
	}
	hub := n.Notifier()
	defer hub.Close()
	ch := unique("reresolved-channel")
	w := driver.NewTrackingWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("the subscription was not confirmed")
	}
	defer hub.Unsubscribe(ch, w)
	c := newClient(t, nodes)
	ctx := ctxFor(t, 12*patience)
	name := unique("reresolved-lock")
	lock, err := c.Obtain(ctx, name, time.Minute)
	must(t, "Obtain", err)
	lk := lockKey(t, name)
	eventually(t, "the lock's key on the node before the move", patience, func() bool { return exists(n, lk) })

	// The move: the name points at the new address, the old one drops
	// everything.
	asked := dns.answered()
	dns.point(secondIP)
	old.SetBlackhole(true)
	moved := time.Now()

	// The driver's connections to the old address hang until its
	// timeouts end them; then it resolves the name again.
	eventually(t, "a request answered from the new address", 3*patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "GET", key)
		return err == nil && v == "kept"
	})
	t.Logf("a request answered %v after the move", time.Since(moved).Round(time.Millisecond))
	if dns.answered() == asked || seen.count(secondIP) == 0 {
		t.Errorf("no new resolution and connection after the move (A queries %d before, %d after; connections to %s: %d)", asked, dns.answered(), secondIP, seen.count(secondIP))
	}
	publish := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = n.Do(ctx, "PUBLISH", ch, "released")
	}
	// A pub/sub connection that goes silent is found out by the driver's
	// own liveness check (measured: 20 s with go-redis, 12 s with
	// rueidis, 30 s with redigo); until then a waiter falls back on timed
	// retries.
	if !hearsWithin(t, w, ch, publish, 6*patience) {
		t.Errorf("no message reached the waiter within %v of the move: not subscribed again at the new address", 6*patience)
	}
	t.Logf("the waiter heard a message %v after the move", time.Since(moved).Round(time.Millisecond))
	must(t, "Refresh after the move", lock.Refresh(ctx, time.Minute))
	eventually(t, "the refresh on the moved node", 3*patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "PTTL", lk)
		ms, ok := v.(int64)
		return err == nil && ok && ms > (50*time.Second).Milliseconds()
	})
	must(t, "Release after the move", lock.Release(ctx))
	eventually(t, "the release on the moved node", 3*patience, func() bool { return !exists(n, lk) })
	again, err := c.Obtain(ctx, name, time.Minute)
	must(t, "Obtain after the move", err)
	if again.Token() <= lock.Token() {
		t.Errorf("token %d after the move, want above %d", again.Token(), lock.Token())
	}
	eventually(t, "the next obtain on the moved node", 3*patience, func() bool { return exists(n, lk) })
	must(t, "Release", again.Release(ctx))
}

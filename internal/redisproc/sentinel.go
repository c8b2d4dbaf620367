package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelTimeout bounds each wait of the sentinel harness: start-up until
// the deployment is settled, and a failover until every party agrees.
const sentinelTimeout = 30 * time.Second

// Sentinel is a Redis Sentinel deployment on loopback: one master, one
// replica and three sentinels monitoring the master under Name with a quorum
// of two.
//
// Master and Replica name the current roles: a successful Failover swaps
// them. Their methods are not safe to use concurrently with Failover.
type Sentinel struct {
	Master, Replica *Server
	Sentinels       []*SentinelProc
	Name            string
}

// SentinelProc is one redis-sentinel process. It has the methods of Server
// (Addr, Port, Pid, Kill, Pause, Resume, Stop), except that Client returns a
// SentinelClient and Restart starts the sentinel again from its config file,
// which the sentinel rewrites with what it has learnt.
type SentinelProc struct {
	*Server
	conf string
}

// StartSentinel starts a master, a replica of it and three sentinels
// monitoring it as name, and waits until the replica is in sync and every
// sentinel knows the master, the replica and the two other sentinels. The
// caller must call Stop.
func StartSentinel(name string) (*Sentinel, error) {
	if name == "" || strings.ContainsAny(name, " \t\r\n\"'") {
		return nil, fmt.Errorf("redisproc: invalid sentinel master name %q", name)
	}
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		return nil, ErrNotInstalled
	}
	d := &Sentinel{Name: name}
	var err error
	// Without repl-diskless-sync-delay 0 a master waits 5 s for more
	// replicas before a full sync. Both nodes get it: either may be master.
	d.Master, err = StartServer(Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	if err != nil {
		return nil, err
	}
	d.Replica, err = StartServer(Options{Args: []string{
		"--repl-diskless-sync-delay", "0",
		"--replicaof", "127.0.0.1", strconv.Itoa(d.Master.Port()),
	}})
	if err != nil {
		_ = d.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()
	if err := waitLinkUp(ctx, d.Replica); err != nil {
		_ = d.Stop()
		return nil, err
	}
	for range 3 {
		p, err := startSentinelProc(name, d.Master.Port())
		if err != nil {
			_ = d.Stop()
			return nil, err
		}
		d.Sentinels = append(d.Sentinels, p)
	}
	for _, p := range d.Sentinels {
		if err := d.waitSettled(ctx, p); err != nil {
			_ = d.Stop()
			return nil, err
		}
	}
	return d, nil
}

// SentinelAddrs lists the sentinels' addresses.
func (d *Sentinel) SentinelAddrs() []string { return Addrs(d.Sentinels) }

// FailoverClient returns a new client that asks the sentinels for the
// current master, with context deadlines honoured. The caller must close it.
func (d *Sentinel) FailoverClient() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            d.Name,
		SentinelAddrs:         d.SentinelAddrs(),
		ContextTimeoutEnabled: true,
	})
}

// MasterAddr asks the sentinels, in order, for the master's address and
// returns the first answer.
func (d *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, p := range d.Sentinels {
		sc := p.Client()
		addr, err := masterAddr(ctx, sc, d.Name)
		_ = sc.Close()
		if err == nil {
			return addr, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.Addr(), err))
	}
	return "", fmt.Errorf("redisproc: no sentinel knows master %q: %w", d.Name, errors.Join(errs...))
}

// Failover forces a failover with SENTINEL FAILOVER on the first sentinel
// and waits until every sentinel names the former replica as master and the
// former replica reports role:master. It then swaps Master and Replica.
//
// The former master keeps acting as a master until the sentinels turn it
// into a replica, several seconds later; Failover does not wait for that.
func (d *Sentinel) Failover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sentinelTimeout)
	defer cancel()
	first := d.Sentinels[0]
	fc := first.Client()
	// A sentinel refuses with NOGOODSLAVE while it has no fresh enough view
	// of the replica; retry until ctx ends.
	err := waitFor(ctx, func() (bool, error) {
		err := fc.Failover(ctx, d.Name).Err()
		return err == nil || redis.HasErrorPrefix(err, "INPROG"), err
	})
	_ = fc.Close()
	if err != nil {
		return fmt.Errorf("redisproc: SENTINEL FAILOVER %s on %s: %w (log: %s)", d.Name, first.Addr(), err, first.logTail())
	}
	want := d.Replica.Addr()
	for _, p := range d.Sentinels {
		sc := p.Client()
		err := waitFor(ctx, func() (bool, error) {
			addr, err := masterAddr(ctx, sc, d.Name)
			if err != nil {
				return false, err
			}
			return addr == want, fmt.Errorf("master is %s", addr)
		})
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("redisproc: sentinel %s does not name %s as master of %q after failover: %w (log: %s)",
				p.Addr(), want, d.Name, err, p.logTail())
		}
	}
	c := d.Replica.Client()
	defer c.Close()
	err = waitFor(ctx, func() (bool, error) {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master"), err
	})
	if err != nil {
		return fmt.Errorf("redisproc: %s not master after failover: %w (log: %s)", want, err, d.Replica.logTail())
	}
	d.Master, d.Replica = d.Replica, d.Master
	return nil
}

// Stop stops every sentinel, then the data nodes, and removes their
// directories. It is safe to call more than once.
func (d *Sentinel) Stop() error {
	var errs []error
	for _, p := range d.Sentinels {
		errs = append(errs, p.Stop())
	}
	for _, s := range []*Server{d.Replica, d.Master} {
		if s != nil {
			errs = append(errs, s.Stop())
		}
	}
	return errors.Join(errs...)
}

// waitSettled waits until sentinel p names the master, sees the two other
// sentinels and sees the replica as healthy, so that a failover can start.
func (d *Sentinel) waitSettled(ctx context.Context, p *SentinelProc) error {
	sc := p.Client()
	defer sc.Close()
	want := d.Master.Addr()
	err := waitFor(ctx, func() (bool, error) {
		addr, err := masterAddr(ctx, sc, d.Name)
		if err != nil {
			return false, err
		}
		if addr != want {
			return false, fmt.Errorf("master is %s, want %s", addr, want)
		}
		others, err := sc.Sentinels(ctx, d.Name).Result()
		if err != nil {
			return false, err
		}
		if len(others) != len(d.Sentinels)-1 {
			return false, fmt.Errorf("sees %d other sentinels, want %d", len(others), len(d.Sentinels)-1)
		}
		replicas, err := sc.Replicas(ctx, d.Name).Result()
		if err != nil {
			return false, err
		}
		if len(replicas) != 1 {
			return false, fmt.Errorf("sees %d replicas, want 1", len(replicas))
		}
		if r := replicas[0]; r["flags"] != "slave" || r["master-link-status"] != "ok" {
			return false, fmt.Errorf("replica %s:%s has flags %q, master link %q", r["ip"], r["port"], r["flags"], r["master-link-status"])
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("redisproc: sentinel %s not settled: %w (log: %s)", p.Addr(), err, p.logTail())
	}
	return nil
}

// waitLinkUp waits until replica s reports its link to the master up.
func waitLinkUp(ctx context.Context, s *Server) error {
	c := s.Client()
	defer c.Close()
	err := waitFor(ctx, func() (bool, error) {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up"), err
	})
	if err != nil {
		return fmt.Errorf("redisproc: replica %s not in sync: %w (log: %s)", s.Addr(), err, s.logTail())
	}
	return nil
}

func startSentinelProc(name string, masterPort int) (*SentinelProc, error) {
	p := &SentinelProc{}
	srv, err := launch("redis-sentinel", "",
		func(s *Server) error {
			p.Server = s
			p.conf = filepath.Join(s.dir, "sentinel.conf")
			return p.writeConf(name, masterPort)
		},
		func(s *Server) []string { return []string{filepath.Join(s.dir, "sentinel.conf")} })
	if err != nil {
		return nil, fmt.Errorf("redisproc: sentinel: %w", err)
	}
	p.Server = srv
	return p, nil
}

// writeConf writes a fresh config file. Sentinels rewrite it with their id
// and what they learn, so it lives in the sentinel's own writable directory.
func (p *SentinelProc) writeConf(name string, masterPort int) error {
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %q
logfile "redis.log"
sentinel resolve-hostnames no
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %[3]s 1000
sentinel failover-timeout %[3]s 5000
sentinel parallel-syncs %[3]s 1
`, p.port, p.dir, name, masterPort)
	if err := os.WriteFile(p.conf, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	return nil
}

// Client returns a new sentinel client for this sentinel. The caller must
// close it.
func (p *SentinelProc) Client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{
		Addr:                  p.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
}

// masterAddr asks a sentinel for the address of master name.
func masterAddr(ctx context.Context, sc *redis.SentinelClient, name string) (string, error) {
	hp, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("GET-MASTER-ADDR-BY-NAME %s answered %q", name, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

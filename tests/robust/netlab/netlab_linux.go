//go:build linux

package netlab

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stateDir records the labs of living processes, for Sweep: one file per
// lab, named by its prefix, holding its process id.
const stateDir = "/run/redlock-netlab"

// Lab is a set of network namespaces joined by the lab's switch.
type Lab struct {
	prefix string
	subnet int // the second octet of 10.subnet.0.0/16
	lock   *os.File

	nodes  []*node // index 0 is the root namespace
	byName map[string]*node

	mu       sync.RWMutex
	policies map[[2]int]Policy
	rngMu    sync.Mutex
	rng      *mrand.Rand

	closed  atomic.Bool
	readers sync.WaitGroup
	pending sync.WaitGroup

	forwarded, dropped atomic.Int64
}

type node struct {
	idx  int
	name string // the namespace's name in the lab; Root for the root
	ns   string // the namespace's system name (ip netns); "" for the root
	dev  string // its TUN device
	ip   net.IP
	tun  *os.File
	wmu  sync.Mutex
}

// New creates one namespace for each name, and the lab's switch, with a
// random seed for the losses and jitters. The caller must Close it.
func New(names []string, seed uint64) (l *Lab, err error) {
	if err := check(); err != nil {
		return nil, err
	}
	Sweep()
	var b [3]byte
	_, _ = rand.Read(b[:])
	l = &Lab{
		prefix:   "rl" + hex.EncodeToString(b[:]),
		byName:   map[string]*node{},
		policies: map[[2]int]Policy{},
		rng:      mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, l.prefix), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	defer func() {
		if err != nil {
			_ = l.Close()
			l = nil
		}
	}()
	if err := l.pickSubnet(); err != nil {
		return nil, err
	}
	all := append([]string{Root}, names...)
	for i, name := range all {
		if _, dup := l.byName[name]; dup || name == "" || strings.ContainsAny(name, " /") {
			return nil, fmt.Errorf("netlab: bad or repeated namespace name %q", name)
		}
		n := &node{idx: i, name: name, dev: fmt.Sprintf("%st%d", l.prefix, i),
			ip: net.IPv4(10, byte(l.subnet), byte(i/250), byte(1+i%250)).To4()}
		if i > 0 {
			n.ns = l.prefix + "-" + name
		}
		l.nodes = append(l.nodes, n)
		l.byName[name] = n
		if err := l.setup(n); err != nil {
			return nil, err
		}
	}
	for _, n := range l.nodes {
		l.readers.Add(1)
		go l.forward(n)
	}
	return l, nil
}

// check reports what the machine lacks for a Lab.
func check() error {
	if os.Geteuid() != 0 {
		return errors.New("netlab: network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN); run the robustness tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netlab: the ip command (iproute2) is not installed (on Debian: apt-get install iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("netlab: no TUN device: %v (load the tun module, or run where /dev/net/tun exists)", err)
	}
	return nil
}

// pickSubnet takes a 10.x.0.0/16 that no interface of the root namespace
// uses, holding a lock on it so that two labs of one machine differ.
func (l *Lab) pickSubnet() error {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	used := map[int]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip := ipn.IP.To4(); ip != nil && ip[0] == 10 {
				used[int(ip[1])] = true
			}
		}
	}
	start := mrand.IntN(200)
	for i := range 200 {
		s := 40 + (start+i)%200
		if used[s] {
			continue
		}
		f, err := os.OpenFile(filepath.Join(stateDir, "subnet-"+strconv.Itoa(s)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return fmt.Errorf("netlab: %w", err)
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			_ = f.Close()
			continue
		}
		l.subnet, l.lock = s, f
		return nil
	}
	return errors.New("netlab: no free 10.x.0.0/16 subnet for the lab")
}

// ip runs the ip command.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// setup creates n's namespace and its TUN device, and gives it its address.
func (l *Lab) setup(n *node) error {
	if n.ns != "" {
		if err := ip("netns", "add", n.ns); err != nil {
			return err
		}
	}
	f, err := openTUN(n.dev)
	if err != nil {
		return err
	}
	n.tun = f
	in := []string{}
	if n.ns != "" {
		if err := ip("link", "set", n.dev, "netns", n.ns); err != nil {
			return err
		}
		in = []string{"-n", n.ns}
		if err := ip(append(in, "link", "set", "lo", "up")...); err != nil {
			return err
		}
	}
	if err := ip(append(in, "addr", "add", n.ip.String()+"/16", "dev", n.dev)...); err != nil {
		return err
	}
	return ip(append(in, "link", "set", n.dev, "up")...)
}

// openTUN creates a TUN device (IPv4 packets without a header) that lives
// as long as the returned file is open.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("netlab: open /dev/net/tun: %w", err)
	}
	var req [unix.IFNAMSIZ + 64]byte
	copy(req[:], name)
	*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("netlab: create TUN device %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// forward reads n's packets and passes each to its destination.
func (l *Lab) forward(n *node) {
	defer l.readers.Done()
	buf := make([]byte, 65536)
	for {
		k, err := n.tun.Read(buf)
		if err != nil {
			if l.closed.Load() || errors.Is(err, os.ErrClosed) {
				return
			}
			if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN) {
				continue
			}
			return
		}
		pkt := buf[:k]
		if k < 20 || pkt[0]>>4 != 4 {
			continue // IPv4 only
		}
		dst := net.IP(pkt[16:20])
		if dst[0] != 10 || int(dst[1]) != l.subnet {
			continue
		}
		di := int(dst[2])*250 + int(dst[3]) - 1
		if di < 0 || di >= len(l.nodes) || di == n.idx {
			continue
		}
		to := l.nodes[di]
		l.mu.RLock()
		p := l.policies[[2]int{n.idx, di}]
		l.mu.RUnlock()
		if p.Drop {
			l.dropped.Add(1)
			continue
		}
		var delay time.Duration
		if p.Loss > 0 || p.Jitter > 0 {
			l.rngMu.Lock()
			lose := p.Loss > 0 && l.rng.Float64() < p.Loss
			if p.Jitter > 0 {
				delay = time.Duration(l.rng.Int64N(int64(p.Jitter)))
			}
			l.rngMu.Unlock()
			if lose {
				l.dropped.Add(1)
				continue
			}
		}
		delay += p.Delay
		l.forwarded.Add(1)
		if delay <= 0 {
			to.write(pkt)
			continue
		}
		cp := append([]byte(nil), pkt...)
		l.pending.Add(1)
		time.AfterFunc(delay, func() {
			defer l.pending.Done()
			if !l.closed.Load() {
				to.write(cp)
			}
		})
	}
}

func (n *node) write(pkt []byte) {
	n.wmu.Lock()
	_, _ = n.tun.Write(pkt)
	n.wmu.Unlock()
}

// Set sets the policy of the link from one namespace to another (names as
// given to New, or Root); Policy{} clears it.
func (l *Lab) Set(from, to string, p Policy) error {
	a, b := l.byName[from], l.byName[to]
	if a == nil || b == nil || a == b {
		return fmt.Errorf("netlab: no link from %q to %q", from, to)
	}
	l.mu.Lock()
	if p.IsZero() {
		delete(l.policies, [2]int{a.idx, b.idx})
	} else {
		l.policies[[2]int{a.idx, b.idx}] = p
	}
	l.mu.Unlock()
	return nil
}

// SetBoth sets the policy of both directions between a and b.
func (l *Lab) SetBoth(a, b string, p Policy) error {
	return errors.Join(l.Set(a, b, p), l.Set(b, a, p))
}

// ClearAll clears every link's policy.
func (l *Lab) ClearAll() {
	l.mu.Lock()
	clear(l.policies)
	l.mu.Unlock()
}

// Addr is the IPv4 address of the namespace named name.
func (l *Lab) Addr(name string) string {
	if n := l.byName[name]; n != nil {
		return n.ip.String()
	}
	return ""
}

// NS is the system name of the namespace named name (for ip netns exec);
// "" for Root.
func (l *Lab) NS(name string) string {
	if n := l.byName[name]; n != nil {
		return n.ns
	}
	return ""
}

// Command returns a command that runs program in the namespace named name,
// with ip netns exec (the program itself, in place of ip: its process id
// is the command's).
func (l *Lab) Command(name, program string, args ...string) *exec.Cmd {
	ns := l.NS(name)
	if ns == "" {
		return exec.Command(program, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", ns, program}, args...)...)
}

// Stats returns the packets forwarded and dropped so far.
func (l *Lab) Stats() (forwarded, dropped int64) { return l.forwarded.Load(), l.dropped.Load() }

// Close stops the switch and removes the lab's devices and namespaces. The
// processes started in them must have been stopped first.
func (l *Lab) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, n := range l.nodes {
		if n.tun != nil {
			errs = append(errs, n.tun.Close())
		}
	}
	l.readers.Wait()
	l.pending.Wait()
	for _, n := range l.nodes {
		if n.ns != "" {
			errs = append(errs, ip("netns", "del", n.ns))
		}
	}
	if l.lock != nil {
		_ = l.lock.Close()
	}
	_ = os.Remove(filepath.Join(stateDir, l.prefix))
	return errors.Join(errs...)
}

// Sweep removes the namespaces of labs whose process is gone (a test
// binary that was killed before its clean-ups ran). It touches only labs
// recorded in stateDir.
func Sweep() {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	nss, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		prefix := e.Name()
		if !strings.HasPrefix(prefix, "rl") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(stateDir, prefix))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || unix.Kill(pid, 0) == nil {
			continue // alive (or unreadable): not ours to touch
		}
		for _, ns := range nss {
			if strings.HasPrefix(ns.Name(), prefix+"-") {
				_ = ip("netns", "del", ns.Name())
			}
		}
		_ = os.Remove(filepath.Join(stateDir, prefix))
	}
}

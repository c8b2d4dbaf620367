// Package failpoint injects faults at points of the lock's protocol, as
// etcd's failpoints do, through a go-redis hook on each node's client: the
// library's scripts are told apart by their keys (internal/keys' layout),
// so no code of the library changes.
//
// The points:
//
//   - AcquireReply: after a node has run an acquire script and replied,
//     before the reply reaches the library: the client's decision waits, or
//     the reply is lost although the node took the lock;
//   - Fence: before the second round's fence (or the family's seal) is sent,
//     between the acquire and the fence;
//   - RefreshBatch: around a pipeline of refresh scripts (the keep-alive's
//     batched refresh of a node): delayed before it is sent, or its replies
//     lost after the node ran it;
//   - Release: before a release is sent.
package failpoint

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
)

// Points.
const (
	AcquireReply = "acquire-reply"
	Fence        = "fence"
	RefreshBatch = "refresh-batch"
	Release      = "release"
)

// Points lists every point, for a seed to draw from.
var Points = []string{AcquireReply, Fence, RefreshBatch, Release}

// ErrReplyLost is what the library sees for a reply a failpoint dropped.
var ErrReplyLost = errors.New("failpoint: reply lost")

// Spec is one failpoint: at Point on the listed nodes, from Start to Stop
// (Unix nanoseconds of the wall clock), with probability Prob (1 when 0),
// delay by Delay, and drop the reply when Drop is set (the command has run
// on the node).
type Spec struct {
	Point string        `json:"point"`
	Nodes []int         `json:"nodes"`
	Start int64         `json:"start"`
	Stop  int64         `json:"stop"`
	Prob  float64       `json:"prob,omitempty"`
	Delay time.Duration `json:"delay,omitempty"`
	Drop  bool          `json:"drop,omitempty"`
}

func (s Spec) String() string {
	what := "delay " + s.Delay.String()
	if s.Drop {
		what += ", reply lost"
	}
	return fmt.Sprintf("%s on nodes %v: %s (p=%.2f)", s.Point, s.Nodes, what, s.prob())
}

func (s Spec) prob() float64 {
	if s.Prob <= 0 {
		return 1
	}
	return s.Prob
}

// Set is the failpoints of one client process, shared by the hooks of its
// node clients.
type Set struct {
	specs []Spec
	mu    sync.Mutex
	rng   *rand.Rand
	fired []atomic.Int64 // per spec
}

// NewSet returns the failpoints specs, drawing their probabilities from
// seed.
func NewSet(specs []Spec, seed uint64) *Set {
	return &Set{specs: specs, rng: rand.New(rand.NewPCG(seed, 7)), fired: make([]atomic.Int64, len(specs))}
}

// Fired returns how many times each spec fired.
func (s *Set) Fired() []int64 {
	n := make([]int64, len(s.specs))
	for i := range s.fired {
		n[i] = s.fired[i].Load()
	}
	return n
}

// Specs returns the set's specs.
func (s *Set) Specs() []Spec { return s.specs }

// match returns the spec that fires now at point on node, if any.
func (s *Set) match(point string, node int) (Spec, bool) {
	now := time.Now().UnixNano()
	for i, sp := range s.specs {
		if sp.Point != point || now < sp.Start || now >= sp.Stop {
			continue
		}
		hit := false
		for _, n := range sp.Nodes {
			hit = hit || n == node
		}
		if !hit {
			continue
		}
		s.mu.Lock()
		fire := s.rng.Float64() < sp.prob()
		s.mu.Unlock()
		if fire {
			s.fired[i].Add(1)
			return sp, true
		}
	}
	return Spec{}, false
}

// Hook returns the hook for the client of node.
func (s *Set) Hook(node int) redis.Hook { return hook{s: s, node: node} }

type hook struct {
	s    *Set
	node int
}

func (h hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch Classify(cmd.Args()) {
		case AcquireReply:
			err := next(ctx, cmd)
			if sp, ok := h.s.match(AcquireReply, h.node); ok {
				time.Sleep(sp.Delay)
				if sp.Drop && err == nil {
					err = ErrReplyLost
					cmd.SetErr(err)
				}
			}
			return err
		case Fence, Release:
			p := Classify(cmd.Args())
			if sp, ok := h.s.match(p, h.node); ok {
				time.Sleep(sp.Delay)
				err := next(ctx, cmd)
				if sp.Drop && err == nil {
					err = ErrReplyLost
					cmd.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook applies the failpoints to a pipeline: the go-redis
// driver sends concurrent requests to one node as one pipeline
// (auto-pipelining), and the keep-alive its batched refreshes. A refresh
// batch's failpoint is drawn once per pipeline and drops every reply, as
// before; an acquire's, a fence's or a release's is drawn for its command:
// its delay holds the whole pipeline (before it is sent, or for an
// acquire after it ran: replies come back in order), and its drop loses
// that command's reply alone.
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var before, after time.Duration
		var lost []redis.Cmder
		refresh, dropAll := false, false
		for _, c := range cmds {
			p := Classify(c.Args())
			if p == "" || (p == RefreshBatch && refresh) {
				continue
			}
			sp, ok := h.s.match(p, h.node)
			if p == RefreshBatch {
				refresh = true
			}
			if !ok {
				continue
			}
			switch {
			case p == AcquireReply:
				after = max(after, sp.Delay)
			default:
				before = max(before, sp.Delay)
			}
			switch {
			case !sp.Drop:
			case p == RefreshBatch:
				dropAll = true
			default:
				lost = append(lost, c)
			}
		}
		time.Sleep(before)
		err := next(ctx, cmds)
		time.Sleep(after)
		if dropAll {
			lost = cmds
		}
		if err == nil && len(lost) > 0 {
			for _, c := range lost {
				if c.Err() == nil {
					c.SetErr(ErrReplyLost)
				}
			}
			err = ErrReplyLost
		}
		return err
	}
}

// Classify names the protocol point of a command by its script's keys:
// AcquireReply for an acquire (the lock, its fence counter, the epoch),
// Fence for a fence or a seal (the fence counter first), RefreshBatch for a
// refresh (the lock, the epoch record and, since issue 44, the fence
// counter), Release for a release (the lock, and since issue 44 its fence
// counter, whose token it retires); "" for anything else. The layouts
// before issue 44 (a refresh without the counter, a release of the lock
// alone) are still named, for histories replayed from older runs.
func Classify(args []any) string {
	if len(args) < 4 {
		return ""
	}
	// FCALL (the acquire, run as a Redis Function) has EVALSHA's layout.
	if c := strings.ToLower(fmt.Sprint(args[0])); c != "evalsha" && c != "eval" && c != "fcall" {
		return ""
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || n < 1 || len(args) < 3+n {
		return ""
	}
	k := make([]string, n)
	for i := range n {
		k[i] = fmt.Sprint(args[3+i])
	}
	switch {
	case n == 3 && k[1] == keys.Fence(k[0]):
		return AcquireReply
	case strings.HasSuffix(k[0], ":fence") && n <= 2:
		return Fence
	case (n == 2 || n == 3 && k[2] == keys.Fence(k[0])) && strings.HasSuffix(k[1], ":epoch"):
		return RefreshBatch
	case (n == 1 || n == 2 && k[1] == keys.Fence(k[0])) && strings.HasPrefix(k[0], "{") && !strings.HasSuffix(k[0], ":epoch"):
		return Release
	}
	return ""
}

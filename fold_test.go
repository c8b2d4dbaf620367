package redlock

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/script"
)

// The first record folded into the first obtain's acquire
// (recorder.foldFirst; docs/reconfiguration.md, "The first obtain").

// sentLog counts what a go-redis client sends: each request (Do) and
// each pipeline, with the first word of each of its commands.
type sentLog struct {
	mu    sync.Mutex
	sends [][]string
}

func (s *sentLog) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (s *sentLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.add([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (s *sentLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.add(cmds)
		return next(ctx, cmds)
	}
}

func (s *sentLog) add(cmds []redis.Cmder) {
	var words []string
	for _, c := range cmds {
		words = append(words, c.Name())
	}
	s.mu.Lock()
	s.sends = append(s.sends, words)
	s.mu.Unlock()
}

func (s *sentLog) take() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sends
	s.sends = nil
	return out
}

// TestFirstObtainFoldsTheRecord: with configuration records on (the
// default), a new Client's first obtain on five nodes sends each node one
// pipeline, its record, the acquire and the identity's read, and nothing
// before it; the record is on every node that voted, under the set's
// name by address, and the next record adds the name by the identities.
func TestFirstObtainFoldsTheRecord(t *testing.T) {
	cl := startNodes(t, 5)
	ctx := context.Background()
	logs := make([]*sentLog, len(cl.servers))
	clients := make([]redis.UniversalClient, len(cl.servers))
	for i, s := range cl.servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = rc.Close() })
		logs[i] = &sentLog{}
		rc.AddHook(logs[i])
		clients[i] = rc
	}
	const prefix = "fold:"
	var second atomic.Bool
	hook := hookFunc(func(e Event) {
		if a, ok := e.(AttemptEvent); ok && a.SecondRound {
			second.Store(true)
		}
	})
	c := newClient(t, clients, append(seamOpts(prefix), WithHook(hook))...)
	l, err := c.TryObtain(ctx, "job", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh server lacks the library: the pipeline is sent again
	// after FUNCTION LOAD. The connection's own setup (HELLO, CLIENT)
	// goes too, and the fencing token's second round (EVALSHA, then EVAL
	// after the fresh server's NOSCRIPT) where the
	// new counters were seeded on both sides of a second's edge (the
	// CI run of 9e02fdc; BenchmarkNewNames measures how often).
	for i, lg := range logs {
		for _, s := range lg.take() {
			switch {
			case len(s) == 1 && (s[0] == "hello" || s[0] == "client" || s[0] == "function"):
			case len(s) == 1 && (s[0] == "evalsha" || s[0] == "eval") && second.Load():
			case len(s) == 2 && s[0] == "client" && s[1] == "client":
			case len(s) == 3 && s[0] == "fcall" && s[1] == "fcall" && s[2] == "fcall":
			default:
				t.Fatalf("node %d before the release sent %v, want only pipelines [fcall (record) fcall (acquire) fcall (id)]", i, s)
			}
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A node that answered after the round's wait is learned when its
	// reply comes.
	eventually(t, "every node identified", func() bool { return c.e.rec.jointSets().Known })
	sets := c.e.rec.jointSets()
	if sets.CurFP == sets.CurAlias {
		t.Fatalf("the set is named by address alone: %+v", sets)
	}
	configs := keys.Layout{Prefix: prefix}.Configs()
	voted := 0
	for _, n := range cl.clients {
		if ok, _ := n.HExists(ctx, configs, keys.ConfigSingle(sets.CurAlias)).Result(); ok {
			voted++
		}
	}
	if voted < 3 {
		t.Fatalf("the record by address is on %d nodes, want a quorum at least", voted)
	}
	// The recorder's next round (every max TTL / 4) names the set by
	// the identities.
	for i, n := range cl.clients {
		eventually(t, "node "+strconv.Itoa(i)+" records the set by its identities", func() bool {
			ok, _ := n.HExists(ctx, configs, keys.ConfigSingle(sets.CurFP)).Result()
			return ok
		})
	}
	// The second obtain sends no record.
	for _, lg := range logs {
		lg.take()
	}
	l, err = c.TryObtain(ctx, "job", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	for i, lg := range logs {
		for _, s := range lg.take() {
			if len(s) > 1 {
				t.Fatalf("node %d: the second obtain sent a pipeline %v", i, s)
			}
		}
	}
}

// identifiedSet is the fingerprint of the nodes' set by their identities,
// from a Client that obtained on them with records off (prefix's
// identities are then on the nodes).
func identifiedSet(t *testing.T, clients []redis.UniversalClient, prefix string) string {
	t.Helper()
	ctx := context.Background()
	c := newClient(t, clients, append(seamOpts(prefix), WithConfigRecords(false))...)
	l, err := c.TryObtain(ctx, "identify", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	eventually(t, "every node identified", func() bool { return c.e.ident.done.Load() })
	c.e.ident.mu.Lock()
	defer c.e.ident.mu.Unlock()
	return c.e.sets.curFP
}

// TestFoldedRecordRefusesBesideAMove: a new Client whose nodes show a
// move between its set and another, and a live Client of the other set
// alone, refuses its first obtain with ErrConfigConflict, and leaves no
// key behind: the round that carried the record is given back.
func TestFoldedRecordRefusesBesideAMove(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	const prefix = "foldc:"
	fp := identifiedSet(t, cl.clients, prefix)
	exp := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	writeRecords(t, cl.clients, prefix, keys.ConfigJoint(fp, "X"), exp, keys.ConfigSingle("X"), exp)
	c := newClient(t, cl.clients, seamOpts(prefix)...)
	l, err := c.TryObtain(ctx, "job", 2*time.Second)
	if !errors.Is(err, ErrConfigConflict) {
		if l != nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("beside a live Client of another set alone: %v, want ErrConfigConflict", err)
	}
	key, err := keys.Layout{Prefix: prefix}.Lock("job")
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range cl.clients {
		eventually(t, "node "+strconv.Itoa(i)+" gives the key back", func() bool {
			k, _ := n.Exists(ctx, key).Result()
			return k == 0
		})
	}
}

// TestFoldedRecordTakesTheMoveFloor: a new Client whose nodes show a
// move to its set takes the move floor with its first obtain: the record
// calls for the floor's raise on its nodes (every node answered: two
// nodes, both needed), which is made before the acquire is made again
// (errRecordFirst), and the token is above the floor.
func TestFoldedRecordTakesTheMoveFloor(t *testing.T) {
	cl := startNodes(t, 2)
	ctx := context.Background()
	const prefix = "foldf:"
	fp := identifiedSet(t, cl.clients, prefix)
	nodeNow := latestNodeTime(t, cl.clients)
	// A move from X to this set, live; a floor an hour ahead of the
	// nodes' clocks, fresh for an hour.
	exp := strconv.FormatInt(nodeNow+time.Hour.Milliseconds(), 10)
	floor := nodeNow + time.Hour.Milliseconds()
	writeRecords(t, cl.clients, prefix, keys.ConfigJoint("X", fp), exp,
		keys.ConfigFloor(fp), exp+":"+strconv.FormatInt(floor, 10)+":"+exp)
	hook, attempts := attemptErrs()
	c := newClient(t, cl.clients, append(seamOpts(prefix), WithHook(hook))...)
	l, err := c.TryObtain(ctx, "job", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	if a := attempts(); len(a) != 2 || !errors.Is(a[0], errRecordFirst) || a[1] != nil {
		t.Errorf("attempts %v, want the folded one given way to the record's writes, then one that obtained", a)
	}
	if l.Token() < floor*script.TokenSeed {
		t.Fatalf("token %d below the move floor %d", l.Token(), floor*script.TokenSeed)
	}
}

// writeRecords writes configuration record fields (field, value pairs)
// on every node, under prefix.
func writeRecords(t *testing.T, clients []redis.UniversalClient, prefix string, fieldValues ...any) {
	t.Helper()
	configs := keys.Layout{Prefix: prefix}.Configs()
	for _, n := range clients {
		if err := n.HSet(context.Background(), configs, fieldValues...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// latestNodeTime is the latest of the nodes' clocks (TIME), in ms.
func latestNodeTime(t *testing.T, clients []redis.UniversalClient) int64 {
	t.Helper()
	var latest int64
	for _, n := range clients {
		tm, err := n.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		latest = max(latest, tm.UnixMilli())
	}
	return latest
}

// attemptErrs is a hook that keeps each AttemptEvent's error, and what it
// kept so far.
func attemptErrs() (Hook, func() []error) {
	var mu sync.Mutex
	var errs []error
	hook := hookFunc(func(e Event) {
		if a, ok := e.(AttemptEvent); ok {
			mu.Lock()
			errs = append(errs, a.Err)
			mu.Unlock()
		}
	})
	return hook, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

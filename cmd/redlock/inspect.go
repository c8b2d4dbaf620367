package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/keys"
)

var inspectHelp = helpText{
	usage: "inspect [flags] NAME",
	about: `Shows, for each node, whether the lock NAME is held, its remaining time to
live, a fingerprint of its owner (never the owner's secret value), the lock's
fencing counter and the node's epoch (restart guard) state.

Exit status: 0 when a quorum of nodes answered, 69 when fewer did, 2 for a
usage error.`,
}

// inspectNode is one node's view of a lock.
type inspectNode struct {
	Node  string `json:"node"`
	Held  bool   `json:"held"`
	PTTL  int64  `json:"pttl_ms"` // -1: no expiry; -2: no key
	Owner string `json:"owner,omitempty"`
	Fence string `json:"fence"`
	Epoch string `json:"epoch"`
	Error string `json:"error,omitempty"`
}

// inspectReport is the whole view of a lock.
type inspectReport struct {
	Name     string        `json:"name"`
	Key      string        `json:"key"`
	Quorum   int           `json:"quorum"`
	Answered int           `json:"answered"`
	HeldOn   int           `json:"held_on"` // nodes holding the most common owner
	Owner    string        `json:"owner,omitempty"`
	State    string        `json:"state"` // held, free, partial or unknown
	Nodes    []inspectNode `json:"nodes"`
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("inspect", stdout, stderr)
	fs := cmd.fs
	var nf nodeFlags
	prefix := fs.String("prefix", redlock.DefaultPrefix, "prefix of the lock's Redis key (WithPrefix)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	nf.register(fs)
	if code, ok := cmd.parse(inspectHelp, args); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintln(cmd.stderr, "redlock inspect: want exactly one lock NAME (flags go before it)\nRun \"redlock inspect --help\" for usage.")
		return exitUsage
	}
	specs, secrets, err := nf.resolve()
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	layout := keys.Layout{Prefix: *prefix}
	if _, err := layout.Lock(fs.Arg(0)); err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	cmd.hide(secrets)
	conns := openAll(specs, nf.timeout)
	defer closeAll(conns)

	rep := inspect(ctx, conns, fs.Arg(0), layout, nf.timeout)
	if *asJSON {
		if !cmd.printJSON(rep) {
			return exitError
		}
	} else {
		rep.print(cmd.stdout)
	}
	if rep.Answered < rep.Quorum {
		return cmd.fail(exitUnavailable, "only %d of %d nodes answered, %d needed", rep.Answered, len(conns), rep.Quorum)
	}
	return exitOK
}

// inspect reads lock name's keys, formed as the library forms them
// (internal/keys), on every node. name must be valid (layout.Lock).
func inspect(ctx context.Context, conns []conn, name string, layout keys.Layout, timeout time.Duration) inspectReport {
	key, _ := layout.Lock(name)
	rep := inspectReport{Name: name, Key: key, Quorum: len(conns)/2 + 1, Nodes: make([]inspectNode, len(conns))}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep.Nodes[i] = inspectOne(nctx, c, layout, key)
		})
	}
	wg.Wait()
	owners := map[string]int{}
	held := 0
	for _, n := range rep.Nodes {
		if n.Error == "" {
			rep.Answered++
		}
		if n.Held {
			held++
			owners[n.Owner]++
		}
	}
	for o, k := range owners {
		if k > rep.HeldOn || (k == rep.HeldOn && o < rep.Owner) {
			rep.Owner, rep.HeldOn = o, k
		}
	}
	switch {
	case rep.HeldOn >= rep.Quorum:
		rep.State = "held"
	case held == 0 && rep.Answered >= rep.Quorum:
		rep.State = "free"
	case held > 0:
		rep.State = "partial"
	default:
		rep.State = "unknown"
	}
	return rep
}

func inspectOne(ctx context.Context, c conn, layout keys.Layout, key string) inspectNode {
	n := inspectNode{Node: c.spec.label, PTTL: -2, Fence: "-", Epoch: "-"}
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	// One transaction: the value and its time to live seen together.
	_, err := c.rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		n.Error = nodeErr(err).Error()
		return n
	}
	if v, err := get.Result(); err == nil {
		n.Held = true
		n.Owner = fingerprint(v)
		n.PTTL = pttl.Val().Milliseconds()
		if pttl.Val() < 0 {
			n.PTTL = -1 // a key without expiry: not set by this library
		}
	}
	n.Fence = fenceCounter(ctx, c.rc, keys.Fence(key))
	_, cluster := c.rc.(*redis.ClusterClient)
	n.Epoch = epochState(ctx, c.rc, layout.Epoch(key, cluster))
	return n
}

// fingerprint identifies an owner's value without revealing it: whoever
// knows the value can release or refresh the lock.
func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:4])
}

// fenceCounter reads a lock's fencing counter, as best it can: a string
// counter, or a hash (its field "v", or every field); "-" when absent or
// unreadable.
func fenceCounter(ctx context.Context, rc redis.UniversalClient, key string) string {
	typ, err := rc.Type(ctx, key).Result()
	if err != nil {
		return "-"
	}
	switch typ {
	case "string":
		if v, err := rc.Get(ctx, key).Result(); err == nil {
			return v
		}
	case "hash":
		m, err := rc.HGetAll(ctx, key).Result()
		if err != nil || len(m) == 0 {
			return "-"
		}
		if v, ok := m["v"]; ok {
			return v
		}
		fields := make([]string, 0, len(m))
		for k, v := range m {
			fields = append(fields, k+"="+v)
		}
		sort.Strings(fields)
		return strings.Join(fields, ",")
	}
	return "-"
}

// epochState describes the node's restart-guard epoch from the epoch
// record at epochKey: whether the node is recovering after a restart or
// failover, and for how long. The acquire script keeps the record
// (docs/fencing.md): one per node and prefix, or one per lock on a Redis
// Cluster (keys.Layout.Epoch).
func epochState(ctx context.Context, rc redis.UniversalClient, epochKey string) string {
	rec, err := rc.HMGet(ctx, epochKey, "until").Result()
	if err != nil {
		return "?"
	}
	s, ok := rec[0].(string)
	if !ok {
		return "no record"
	}
	until, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "?"
	}
	now, err := rc.Time(ctx).Result()
	if err != nil {
		return "?"
	}
	if left := time.Duration(until-now.UnixMilli()) * time.Millisecond; left > 0 {
		return "recovering " + left.Round(time.Millisecond).String()
	}
	return "voting"
}

func (r inspectReport) print(w io.Writer) {
	switch r.State {
	case "held":
		fmt.Fprintf(w, "lock %q (key %s): held by owner %s on %d of %d nodes (quorum %d)\n", r.Name, r.Key, r.Owner, r.HeldOn, len(r.Nodes), r.Quorum)
	case "free":
		fmt.Fprintf(w, "lock %q (key %s): free on every node that answered (%d of %d)\n", r.Name, r.Key, r.Answered, len(r.Nodes))
	case "partial":
		fmt.Fprintf(w, "lock %q (key %s): not held by a quorum (%d needed); keys left on some nodes expire with their TTL\n", r.Name, r.Key, r.Quorum)
	default:
		fmt.Fprintf(w, "lock %q (key %s): unknown, only %d of %d nodes answered\n", r.Name, r.Key, r.Answered, len(r.Nodes))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHELD\tPTTL\tOWNER\tFENCE\tEPOCH\tERROR")
	for _, n := range r.Nodes {
		held, pttl, owner := "no", "-", "-"
		if n.Error != "" {
			held = "?"
		}
		if n.Held {
			held, owner = "yes", n.Owner
			pttl = (time.Duration(n.PTTL) * time.Millisecond).String()
			if n.PTTL < 0 {
				pttl = "no expiry"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, held, pttl, owner, n.Fence, n.Epoch, n.Error)
	}
	_ = tw.Flush()
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
)

var inspectHelp = helpText{
	usage: "inspect [flags] NAME [flags]",
	about: `Shows, for each node, whether the lock NAME is held, its remaining time to
live, a fingerprint of its owner (never the owner's secret value), the lock's
fencing counter and the node's epoch (restart guard) state: "voting",
"recovering" and for how long, "restarted: recovers from its next guarded request" (the epoch record
names an earlier process of the node: a restart or a promotion since, so
the node's next acquire, or a Client's configuration record, starts a new
epoch), or
"no record".

For a lock of the family (run --shared, --exclusive, --owner) it also shows
its kind ("read", or "write" for a writer or a reentrant owner), the number of
live holds (readers, or the owner's re-entries; expired ones not counted), the
fencing token recorded for the owner, and whether a writer waits (readers that
come wait behind it). The owner of a write lock is a fingerprint too, unless
--show-owner: a reentrant owner's ID re-enters the lock, and a writer's is its
secret. Hold IDs are never shown.

For a semaphore (Client.Semaphore) the kind is "permit" and HOLDS
counts its live permits of k on each node.

With --json, each node has "answered"; a node that did not answer (down,
frozen, or past --timeout) has "held" and "pttl_ms" null, and its "error",
as the table shows "?". Otherwise "pttl_ms" is the key's time to live in ms,
-1 for a key without expiry, -2 when the lock is not held there.

With --next-nodes (a move to another set of nodes, docs/reconfiguration.md)
it shows the nodes of both sets, and the lock is held when one owner holds
it on a quorum of each set.

Exit status: 0 when a quorum of nodes answered (of each set with
--next-nodes), 69 when fewer did, 77 when fewer did and a node refused the
password or user (WRONGPASS, NOAUTH), 2 for a usage error.`,
}

// inspectNode is one node's view of a lock. In JSON (MarshalJSON), a node
// that did not answer has "answered": false and "held" and "pttl_ms" null:
// unknown, as the table's "?", never "not held".
type inspectNode struct {
	Node  string `json:"node"`
	Held  bool   `json:"held"`
	PTTL  int64  `json:"pttl_ms"` // -1: no expiry; -2: no key
	Owner string `json:"owner,omitempty"`
	// The lock's kind: "plain", or for a lock of the family "read" or
	// "write" (a writer or a reentrant owner: the node cannot tell which), or
	// "permit" for a semaphore (Client.Semaphore), whose Holds are its live
	// permits of Permits.
	Kind    string `json:"kind,omitempty"`
	Permits string `json:"permits,omitempty"`
	// Of a lock of the family: its live holds, the owner's ID (mode 'w',
	// with --show-owner), the token recorded for the owner, and whether a
	// writer waits.
	Holds       int    `json:"holds,omitempty"`
	OwnerID     string `json:"owner_id,omitempty"`
	Token       string `json:"token,omitempty"`
	WriterWaits bool   `json:"writer_waits,omitempty"`
	Fence       string `json:"fence"`
	Epoch       string `json:"epoch"`
	Error       string `json:"error,omitempty"`

	authFailed bool // the node refused the credentials
	badDB      bool // the node has no database of the URL's index
}

// MarshalJSON writes the node's view, with "answered", and null for what a
// node that did not answer left unknown.
func (n inspectNode) MarshalJSON() ([]byte, error) {
	type plain inspectNode // without this method
	v := struct {
		plain
		Answered bool   `json:"answered"`
		Held     *bool  `json:"held"`
		PTTL     *int64 `json:"pttl_ms"`
	}{plain: plain(n), Answered: n.Error == ""}
	if v.Answered {
		v.Held, v.PTTL = &n.Held, &n.PTTL
	}
	return json.Marshal(v)
}

// inspectReport is the whole view of a lock.
type inspectReport struct {
	Name     string        `json:"name"`
	Key      string        `json:"key"`
	Quorum   int           `json:"quorum"`
	Joint    string        `json:"joint,omitempty"` // the joint rule (--next-nodes)
	Answered int           `json:"answered"`
	HeldOn   int           `json:"held_on"` // nodes holding the most common owner
	Owner    string        `json:"owner,omitempty"`
	Kind     string        `json:"kind,omitempty"` // of the most common owner: plain, read or write
	State    string        `json:"state"`          // held, free, partial or unknown
	Nodes    []inspectNode `json:"nodes"`

	quorate    bool // the nodes that answered meet the quorum rule
	authFailed bool // a node refused the credentials
	badDB      bool // a node has no database of its URL's index
}

// jointSuffix says a joint rule after a count, in messages.
func jointSuffix(joint string) string {
	if joint == "" {
		return ""
	}
	return " (joint configuration: " + joint + ")"
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("inspect", stdout, stderr)
	fs := cmd.fs
	var nf nodeFlags
	var nx nextFlag
	prefix := fs.String("prefix", limits.Prefix, "prefix of the lock's Redis key (WithPrefix)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	showOwner := fs.Bool("show-owner", false, "show the owner ID of a read-write or reentrant lock in clear, not a fingerprint")
	nf.register(fs)
	nx.register(fs)
	ops, code, ok := cmd.parseMixed(inspectHelp, args, -1)
	if !ok {
		return code
	}
	names := append(ops.names, ops.rest...)
	if len(names) != 1 || names[0] == "" {
		fmt.Fprintln(cmd.stderr, "redlock inspect: want exactly one lock NAME\nRun \"redlock inspect --help\" for usage.")
		return exitUsage
	}
	name := names[0]
	specs, _, err := nf.resolve()
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	next, _, err := nx.resolve(&nf)
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	layout := keys.Layout{Prefix: *prefix}
	if _, err := layout.Lock(name); err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	conns := openAll(specs, nf.timeout)
	defer closeAll(conns)
	nextConns := openAll(next, nf.timeout)
	defer closeAll(nextConns)
	conns, a, b := joinConns(conns, nextConns)
	rule := quorum.Count(limits.Majority(len(conns)))
	if b != 0 {
		rule = quorum.Joint(a, limits.Majority(bits.OnesCount64(a)), b, limits.Majority(bits.OnesCount64(b)))
	}

	rep := inspect(ctx, conns, rule, name, layout, nf.timeout, *showOwner)
	if *asJSON {
		if !cmd.printJSON(rep) {
			return exitError
		}
	} else {
		rep.print(cmd.stdout)
	}
	if rep.badDB {
		return cmd.fail(exitUsage, "a node has no database of the index in its URL (see ERROR): a configuration error")
	}
	if !rep.quorate {
		code, why := exitUnavailable, ""
		if rep.authFailed {
			code, why = exitAuth, " (authentication failed: see ERROR)"
		}
		return cmd.fail(code, "only %d of %d nodes answered, %d needed%s%s", rep.Answered, len(conns), rep.Quorum, jointSuffix(rep.Joint), why)
	}
	return exitOK
}

// inspect reads lock name's keys, formed as the library forms them
// (internal/keys), on every node. name must be valid (layout.Lock).
func inspect(ctx context.Context, conns []conn, rule quorum.Rule, name string, layout keys.Layout, timeout time.Duration, showOwner bool) inspectReport {
	key, _ := layout.Lock(name)
	rep := inspectReport{Name: name, Key: key, Quorum: rule.Need(), Nodes: make([]inspectNode, len(conns))}
	if rule.IsJoint() {
		rep.Joint = rule.String()
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep.Nodes[i] = inspectOne(nctx, c, layout, key, showOwner, timeout)
		})
	}
	wg.Wait()
	// Holders agree when they have the same kind and owner: readers all
	// agree with each other.
	type holder struct{ kind, owner string }
	owners := map[holder]uint64{}
	held := 0
	var answered uint64
	for i, n := range rep.Nodes {
		if n.Error == "" {
			rep.Answered++
			answered |= 1 << i
		}
		rep.authFailed = rep.authFailed || n.authFailed
		rep.badDB = rep.badDB || n.badDB
		if n.Held {
			held++
			owners[holder{n.Kind, n.Owner}] |= 1 << i
		}
	}
	var best holder
	var bestOn uint64
	for h, on := range owners {
		k := bits.OnesCount64(on)
		if k > rep.HeldOn || (k == rep.HeldOn && (h.kind < best.kind || h.kind == best.kind && h.owner < best.owner)) {
			best, rep.HeldOn, bestOn = h, k, on
		}
	}
	rep.Owner, rep.Kind = best.owner, best.kind
	rep.quorate = rule.Met(answered)
	switch {
	case rule.Met(bestOn):
		rep.State = "held"
	case held == 0 && rep.quorate:
		rep.State = "free"
	case held > 0:
		rep.State = "partial"
	default:
		rep.State = "unknown"
	}
	return rep
}

// readLock reads a lock's key atomically with the node's time: its type,
// the node's TIME in ms, its PTTL, its value (a string) or fields (a hash),
// and whether a writer waits (KEYS[2]). Read-only. It runs with EVAL, not
// redis.NewScript, whose SHA-1 digest panics at start-up in a FIPS 140-only
// process (GODEBUG=fips140=only); inspect is not a hot path.
const readLock = `
local typ = redis.call('TYPE', KEYS[1])['ok']
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local val = false
if typ == 'string' then
  val = redis.call('GET', KEYS[1])
elseif typ == 'hash' then
  val = redis.call('HGETALL', KEYS[1])
end
return {typ, now, redis.call('PTTL', KEYS[1]), val, redis.call('EXISTS', KEYS[2])}
`

func inspectOne(ctx context.Context, c conn, layout keys.Layout, key string, showOwner bool, timeout time.Duration) inspectNode {
	n := inspectNode{Node: c.spec.label, PTTL: -2, Fence: "-", Epoch: "-"}
	res, err := c.rc.Eval(ctx, readLock, []string{key, keys.WriterWaits(key)}).Slice()
	if err == nil && len(res) != 5 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		n.Error, n.authFailed, n.badDB = nodeErr(explainTLS(ctx, c.spec.tlsAddrs(), err, timeout)).Error(), authFailed(err), badDB(err)
		return n
	}
	typ, _ := res[0].(string)
	now, _ := res[1].(int64)
	pttl, _ := res[2].(int64)
	n.WriterWaits = res[4] == int64(1)
	switch typ {
	case "none":
	case "string":
		v, _ := res[3].(string)
		n.Held, n.Kind, n.Owner = true, "plain", fingerprint(v)
	case "hash":
		fields, _ := res[3].([]any)
		n.family(fields, now, showOwner)
	default:
		n.Error = fmt.Sprintf("WRONGTYPE the lock key %s holds a %s, not a lock", key, typ)
		return n
	}
	if n.Held {
		n.PTTL = pttl
		if pttl < 0 {
			n.PTTL = -1 // a key without expiry: not set by this library
		}
	}
	n.Fence = fenceCounter(ctx, c.rc, keys.Fence(key))
	_, cluster := c.rc.(*redis.ClusterClient)
	n.Epoch = epochState(ctx, c.rc, layout.Epoch(key, cluster))
	return n
}

// family reads the fields of a lock of the family's (or a semaphore's)
// hash (keys.FieldMode and the others), a flat list of names and values, at the node's time now (ms): the lock is held while a hold's
// expiry is after now, as the scripts count it (holds.lua).
func (n *inspectNode) family(fields []any, now int64, showOwner bool) {
	var mode, owner string
	for i := 0; i+1 < len(fields); i += 2 {
		f, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		switch {
		case f == keys.FieldMode:
			mode = v
		case f == keys.FieldOwner:
			owner = v
		case f == keys.FieldToken:
			n.Token = v
		case f == keys.FieldPermits:
			n.Permits = v
		case strings.HasPrefix(f, keys.HoldPrefix):
			if exp, err := strconv.ParseInt(v, 10, 64); err == nil && exp > now {
				n.Holds++
			}
		}
	}
	switch mode {
	case string(keys.ModeRead):
		n.Kind = "read"
	case string(keys.ModePermit):
		n.Kind = "permit"
	case string(keys.ModeWrite):
		n.Kind = "write"
		if owner != "" {
			n.Owner = fingerprint(owner)
			if showOwner {
				n.OwnerID = owner
			}
		}
	default:
		n.Kind = "unknown mode " + strconv.Quote(mode)
	}
	n.Held = n.Holds > 0
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
// Cluster (keys.Layout.Epoch). A record last checked by another process
// than the node's (a restart or promotion since) starts a new epoch at the
// next acquire: the node is not voting, whatever the record's end says.
func epochState(ctx context.Context, rc redis.UniversalClient, epochKey string) string {
	r, err := readEpoch(ctx, rc, epochKey)
	if err != nil {
		return "?"
	}
	return r.state()
}

func (r inspectReport) print(w io.Writer) {
	switch r.State {
	case "held":
		by := "owner " + r.Owner
		switch r.Kind {
		case "read":
			by = "readers"
		case "write":
			by = "writer (or reentrant owner) " + r.Owner
		case "permit":
			by = "permits of a semaphore"
		}
		fmt.Fprintf(w, "lock %q (key %s): held by %s on %d of %d nodes (quorum %d%s)\n", r.Name, r.Key, by, r.HeldOn, len(r.Nodes), r.Quorum, jointSuffix(r.Joint))
	case "free":
		fmt.Fprintf(w, "lock %q (key %s): free on every node that answered (%d of %d)\n", r.Name, r.Key, r.Answered, len(r.Nodes))
	case "partial":
		fmt.Fprintf(w, "lock %q (key %s): not held by a quorum (%d needed); keys left on some nodes expire with their TTL\n", r.Name, r.Key, r.Quorum)
	default:
		fmt.Fprintf(w, "lock %q (key %s): unknown, only %d of %d nodes answered\n", r.Name, r.Key, r.Answered, len(r.Nodes))
	}
	family, waits, ids := false, false, false
	for _, n := range r.Nodes {
		family = family || (n.Kind != "" && n.Kind != "plain")
		waits = waits || n.WriterWaits
		ids = ids || n.OwnerID != ""
	}
	if waits {
		fmt.Fprintln(w, "a writer waits: readers that come now wait behind it")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "NODE\tHELD\tPTTL\tOWNER\tFENCE\tEPOCH\tERROR"
	if family {
		header = "NODE\tHELD\tKIND\tHOLDS\tPTTL\tOWNER\tTOKEN\tWWAIT\tFENCE\tEPOCH\tERROR"
		if ids {
			header = strings.Replace(header, "OWNER", "OWNER\tOWNER ID", 1)
		}
	}
	fmt.Fprintln(tw, header)
	for _, n := range r.Nodes {
		held, pttl, owner := "no", "-", "-"
		if n.Error != "" {
			held = "?"
		}
		if n.Held {
			held = "yes"
			pttl = (time.Duration(n.PTTL) * time.Millisecond).String()
			if n.PTTL < 0 {
				pttl = "no expiry"
			}
		}
		if n.Owner != "" {
			owner = n.Owner
		}
		if !family {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, held, pttl, owner, n.Fence, n.Epoch, n.Error)
			continue
		}
		kind, holds, token, wwait := orDash(n.Kind), "-", orDash(n.Token), "no"
		if n.Kind != "" && n.Kind != "plain" {
			holds = strconv.Itoa(n.Holds)
		}
		if n.Permits != "" {
			holds += "/" + n.Permits
		}
		if n.WriterWaits {
			wwait = "yes"
		}
		if ids {
			owner += "\t" + orDash(n.OwnerID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, held, kind, holds, pttl, owner, token, wwait, n.Fence, n.Epoch, n.Error)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

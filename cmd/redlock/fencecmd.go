package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/script"
)

var fenceHelp = helpText{
	usage: "fence inspect|reset [flags] KEY",
	about: `Works on a fenced record of package fence in Redis (fence.Redis: a resource
of Set, Get, Add or Eval, or the record of a Guard whose store is a
*fence.Redis), at KEY in the Redis of --store.

"inspect" prints the record: the highest token it has seen (its fence), the
lock it follows, the highest shared reader's token, and its counts.

"reset" is the way out of a poisoned fence: one raised by a token that no
holder has (a forged Fencing-Token header, a mistaken token), which refuses
every real holder of the lock (docs/fencing.md, "Poisoned fences"). It sets
the fence, and forgets the highest shared reader's token, to one of:

    --latest   the lock's latest token, read from the lock's nodes (--nodes,
               --prefix; the record's lock, or --lock): on a majority of
               them, the largest fencing counter, or where a counter is
               missing or below the node's epoch floor, what the node's next
               token would start from. Every token the lock issued is at or
               below it, so a stale holder stays refused; the current holder
               may be refused too, until its next obtain.
    --token N  the token N (a holder's Lock.Token).
    --forget   no fence: the next sequencer, of any lock, is admitted.

--lock NAME sets the lock the record follows (default: the one it follows).
The value and the counts stay. A fenced SQL row is reset with
fence.Table.Reset, or by hand: UPDATE table SET fence = N WHERE id = ...

Exit status: 0 when done, 1 when the record could not be read or written,
2 for a usage error, 69 when fewer than a majority of the lock's nodes
answered (--latest).`,
}

// fenceFlags are the flags of redlock fence.
type fenceFlags struct {
	nodes  nodeFlags // the lock's nodes (--latest), and the password, TLS and timeout of both
	store  string
	prefix string
	lock   string
	token  string
	latest bool
	forget bool
	asJSON bool
}

func (f *fenceFlags) register(fs *flag.FlagSet) {
	f.nodes.register(fs)
	fs.StringVar(&f.store, "store", "", "Redis URL of the fenced records (redis://, redis[s]-sentinel://, redis[s]-cluster://)")
	fs.StringVar(&f.prefix, "prefix", limits.Prefix, "prefix of the lock's Redis keys on its nodes (WithPrefix), for --latest")
	fs.StringVar(&f.lock, "lock", "", "reset: the lock the record follows (default: the one it follows)")
	fs.StringVar(&f.token, "token", "", "reset: the fence's new token")
	fs.BoolVar(&f.latest, "latest", false, "reset: the lock's latest token, read from its nodes (--nodes)")
	fs.BoolVar(&f.forget, "forget", false, "reset: no fence")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of text")
}

func runFence(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("fence", stdout, stderr)
	var f fenceFlags
	f.register(cmd.fs)
	ops, code, ok := cmd.parseMixed(fenceHelp, args, -1)
	if !ok {
		return code
	}
	words := append(ops.names, ops.rest...)
	if len(words) != 2 || (words[0] != "inspect" && words[0] != "reset") || words[1] == "" {
		return cmd.fail(exitUsage, "want inspect or reset, and one KEY\nRun \"redlock fence --help\" for usage.")
	}
	verb, key := words[0], words[1]
	if f.store == "" {
		return cmd.fail(exitUsage, "no store: give --store, the Redis URL of the fenced records")
	}
	store := nodeFlags{nodes: f.store, passwordFile: f.nodes.passwordFile, timeout: f.nodes.timeout, tls: f.nodes.tls}
	specs, _, err := store.resolve()
	if err != nil || len(specs) != 1 {
		return cmd.fail(exitUsage, "--store: want one Redis URL (%v)", err)
	}
	rc := specs[0].open(f.nodes.timeout)
	defer rc.Close()
	r := fence.NewRedis(rc)
	before, err := r.Inspect(ctx, key)
	if err != nil {
		return cmd.fail(exitError, "reading %s: %v", key, err)
	}
	if verb == "inspect" {
		return f.print(cmd, key, before, nil)
	}
	to, code := f.target(ctx, cmd, before)
	if code != exitOK {
		return code
	}
	if err := r.Reset(ctx, key, to); err != nil {
		return cmd.fail(exitError, "resetting %s: %v", key, err)
	}
	after, err := r.Inspect(ctx, key)
	if err != nil {
		return cmd.fail(exitError, "reading %s after the reset: %v", key, err)
	}
	return f.print(cmd, key, after, &before)
}

// target is the sequencer reset writes, from the flags and the record's
// state before: exactly one of --token, --latest and --forget.
func (f *fenceFlags) target(ctx context.Context, cmd *invocation, before fence.State) (fence.Sequencer, int) {
	n := 0
	for _, on := range []bool{f.token != "", f.latest, f.forget} {
		if on {
			n++
		}
	}
	if n != 1 {
		return fence.Sequencer{}, cmd.fail(exitUsage, "reset: give exactly one of --token, --latest and --forget")
	}
	if f.forget {
		return fence.Sequencer{}, exitOK
	}
	lock := f.lock
	if lock == "" {
		lock = before.Lock
	}
	// A record keeps the lock's name only; the kind is any.
	to := fence.Sequencer{Lock: lock}
	if lock != "" {
		to.Kind = "plain"
	}
	if f.token != "" {
		tok, err := strconv.ParseInt(f.token, 10, 64)
		if err != nil || tok == 0 {
			return fence.Sequencer{}, cmd.fail(exitUsage, "--token %q: want a decimal token other than 0", f.token)
		}
		to.Token = tok
		return to, exitOK
	}
	if lock == "" {
		return fence.Sequencer{}, cmd.fail(exitUsage, "--latest: the record follows no lock: name it with --lock")
	}
	tok, code := f.latestToken(ctx, cmd, lock)
	to.Token = tok
	return to, code
}

// latestToken reads the lock's latest token from its nodes (--nodes): the
// largest over a majority of them of what each node's next token would
// count on from (nodeNext).
func (f *fenceFlags) latestToken(ctx context.Context, cmd *invocation, lock string) (int64, int) {
	layout := keys.Layout{Prefix: f.prefix}
	lockKey, err := layout.Lock(lock)
	if err != nil {
		return 0, cmd.fail(exitUsage, "--lock: %v", err)
	}
	specs, _, err := f.nodes.resolve()
	if err != nil {
		return 0, cmd.fail(exitUsage, "--latest: %v", err)
	}
	conns := openAll(specs, f.nodes.timeout)
	defer closeAll(conns)
	vals := make([]int64, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, f.nodes.timeout)
			defer cancel()
			vals[i], errs[i] = nodeNext(nctx, c, layout, lockKey)
		})
	}
	wg.Wait()
	var latest int64
	answered := 0
	for i, err := range errs {
		if err != nil {
			cmd.say("node %s: %v", conns[i].spec, nodeErr(err))
			continue
		}
		answered++
		latest = max(latest, vals[i])
	}
	if need := limits.Majority(len(conns)); answered < need {
		return 0, cmd.fail(exitUnavailable, "--latest: only %d of %d nodes answered, %d needed", answered, len(conns), need)
	}
	return latest, exitOK
}

// nodeNext is what the node's next token of the lock of lockKey counts on
// from, as token.lua's seen reads it: its fencing counter, or its seed
// where the counter is missing (script.Seed), raised to the floor of the
// node's epoch (the end of its recovery x 1024).
func nodeNext(ctx context.Context, c conn, layout keys.Layout, lockKey string) (int64, error) {
	var node redis.Cmdable = c.rc
	if cc, ok := c.rc.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, lockKey)
		if err != nil {
			return 0, err
		}
		node = m
	}
	now, err := node.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	v := script.Seed(now.UnixMilli())
	if s := fenceCounter(ctx, c.rc, keys.Fence(lockKey)); s != "-" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			v = n
		}
	}
	until, err := node.HGet(ctx, layout.Epoch(lockKey, c.spec.kind == cluster), "until").Int64()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return 0, err
	default:
		v = max(v, until*script.TokenSeed)
	}
	return v, nil
}

// print prints the record's state (and, after a reset, its state before),
// and returns exitOK or, when JSON cannot be written, exitError.
func (f *fenceFlags) print(cmd *invocation, key string, st fence.State, before *fence.State) int {
	if f.asJSON {
		v := struct {
			Key    string       `json:"key"`
			State  fence.State  `json:"state"`
			Before *fence.State `json:"before,omitempty"`
		}{key, st, before}
		if !cmd.printJSON(v) {
			return exitError
		}
		return exitOK
	}
	if before != nil {
		fmt.Fprintf(cmd.stdout, "%s: fence reset to %s (it was %s)\n", key, fenceText(st), fenceText(*before))
	}
	w := cmd.stdout
	fmt.Fprintf(w, "key      %s\n", key)
	fmt.Fprintf(w, "exists   %v\n", st.Exists)
	fmt.Fprintf(w, "fence    %s\n", fenceText(st))
	fmt.Fprintf(w, "shared   %d\n", st.Shared)
	fmt.Fprintf(w, "writes   %d   refused %d   bounded %d\n", st.Writes, st.Refused, st.Bounded)
	return exitOK
}

// fenceText is a record's fence for humans: its token and the lock it
// follows.
func fenceText(st fence.State) string {
	s := "none"
	if st.Fence != 0 {
		s = strconv.FormatInt(st.Fence, 10)
	}
	if st.Lock != "" {
		s += fmt.Sprintf(" (lock %q)", st.Lock)
	}
	return s
}

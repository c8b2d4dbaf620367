package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/script"
)

var probeHelp = helpText{
	usage: "probe [flags]",
	about: `Exits 0 when every node given votes now for a Client with --max-ttl and
--restart-guard: it is out of the restart guard's recovery. Made for a
readiness probe: Ready then means "this node votes", so a
PodDisruptionBudget and minReadySeconds count voting nodes
(docs/kubernetes.md).

It runs the guard on each node as an acquire does (the configuration
record script, with no record to keep), and takes no lock: on a node
restarted or promoted since its epoch record was written, it starts the
node's new epoch, as the first acquire would. Give the deployment's
--max-ttl: a larger one lengthens every client's recovery on the node (the
node's epoch record keeps the largest it was sent). --restart-guard off
is refused: without the guard every node votes at once.

A Redis Cluster keeps one epoch record per lock name, so there is no one
answer for a node: give standalone or Sentinel nodes.

Exit status: 0 when every node votes, 69 when a node is recovering or did
not answer (it says which, and for how long it recovers), 77 when a node
refused the password or user, 2 for a usage error.`,
}

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("probe", stdout, stderr)
	fs := cmd.fs
	var nf nodeFlags
	var guard guardFlags
	prefix := fs.String("prefix", limits.Prefix, "prefix of the Clients' keys (WithPrefix): the epoch record is {PREFIX}:epoch")
	nf.register(fs)
	guard.register(fs)
	if code, ok := cmd.parse(probeHelp, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return cmd.fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	if _, err := guard.options(); err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	if guard.mode == guardOff {
		return cmd.fail(exitUsage, "--restart-guard off: every node votes at once, there is nothing to probe")
	}
	specs, _, err := nf.resolve()
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	for _, s := range specs {
		if s.kind == cluster {
			return cmd.fail(exitUsage, "%s is a Redis Cluster, which keeps an epoch record per lock name: probe standalone or Sentinel nodes", s)
		}
	}
	conns := openAll(specs, nf.timeout)
	defer closeAll(conns)
	mode := byte('1')
	if guard.mode == guardPersistent {
		mode = 'p'
	}
	g := script.NewGuard(mode, guard.maxTTL, false)
	layout := keys.Layout{Prefix: *prefix}
	code := exitOK
	for _, c := range conns {
		rctx, cancel := context.WithTimeout(ctx, nf.timeout)
		r, err := script.Record(rctx, goredis.New(c.rc), layout.Configs(), layout.NodeEpoch(), g, nil, nil)
		cancel()
		switch {
		case err != nil && authFailed(err):
			code = max(code, exitAuth)
			cmd.say("%s: %v", c.spec, nodeErr(err))
		case err != nil:
			code = max(code, exitUnavailable)
			cmd.say("%s: not voting: %v", c.spec, nodeErr(err))
		case r.Recovering > 0:
			code = max(code, exitUnavailable)
			cmd.say("%s: not voting: recovering under the restart guard for another %v (--max-ttl %v)", c.spec, r.Recovering.Round(time.Millisecond), guard.maxTTL)
		default:
			fmt.Fprintf(cmd.stdout, "%s: voting\n", c.spec)
		}
	}
	return code
}

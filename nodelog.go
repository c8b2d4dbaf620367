package redlock

import (
	"context"
	"log/slog"

	"github.com/redlock-go/redlock/internal/nodelog"
)

// The logger's lines about nodes, each node's condition at most once a
// minute (internal/nodelog).

// nodeLogger writes the Client's log lines about its nodes, each at most
// as often as its limit allows.
type nodeLogger struct {
	cfg   *config
	limit nodelog.Limiter
}

// nodes logs the nodes of a round that are skipped or recovering.
func (nl *nodeLogger) nodes(ctx context.Context, nodes []NodeResult) {
	l := nl.cfg.logger
	if l == nil {
		return
	}
	now := nl.cfg.now()
	for _, n := range nodes {
		kind := nodelog.Kind(-1)
		switch n.Reason {
		case "skipped":
			kind = nodelog.Skipped
		case "recovering":
			kind = nodelog.Recovering
		}
		if kind < 0 || !nl.limit.Due(n.Node, kind, now) {
			continue
		}
		if kind == nodelog.Skipped {
			l.LogAttrs(ctx, slog.LevelWarn, "redlock: node skipped after repeated timeouts",
				slog.Int("node", n.Node), slog.String("addr", n.Addr))
		} else {
			l.LogAttrs(ctx, slog.LevelInfo, "redlock: node recovering after a restart or failover",
				slog.Int("node", n.Node), slog.String("addr", n.Addr), slog.String("reason", n.Err.Error()))
		}
	}
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/limits"
)

// Restart guard modes, as given to --restart-guard.
const (
	guardOn         = "on"
	guardPersistent = "persistent"
	guardOff        = "off"
)

// guardFlags are the settings of the restart and failover guard. Every
// client of one deployment must use the same values, services and command
// line alike.
type guardFlags struct {
	maxTTL time.Duration
	mode   string
}

func (g *guardFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&g.maxTTL, "max-ttl", limits.MaxTTL, "the deployment's longest TTL (WithMaxTTL, at most 1h): a restarted\nnode stays out of locking this long; every client must use the same")
	fs.StringVar(&g.mode, "restart-guard", guardOn, "restart and failover guard: on, persistent (GuardTrustPersistence:\nonly with appendonly yes and appendfsync always) or off\n(GuardOff: unsafe unless restarted nodes are kept out)")
}

// options returns the Client options for the flags, or a usage error.
func (g *guardFlags) options() ([]redlock.Option, error) {
	if g.maxTTL < limits.MinTTL {
		return nil, usagef("--max-ttl %v: below the minimum TTL %v", g.maxTTL, limits.MinTTL)
	}
	if g.maxTTL > limits.MaxMaxTTL {
		return nil, usagef("--max-ttl %v: above %v, the longest recovery window a restarted node may be given (WithMaxTTL)", g.maxTTL, limits.MaxMaxTTL)
	}
	opts := []redlock.Option{redlock.WithMaxTTL(g.maxTTL)}
	switch g.mode {
	case guardOn:
	case guardPersistent:
		opts = append(opts, redlock.WithRestartGuard(redlock.GuardTrustPersistence))
	case guardOff:
		opts = append(opts, redlock.WithRestartGuard(redlock.GuardOff))
	default:
		return nil, usagef("--restart-guard %q: want on, persistent or off", g.mode)
	}
	return opts, nil
}

// fitTTL makes a --ttl that was not given fit --max-ttl: its default
// def, or --max-ttl when that is shorter. A default never makes the user's
// other flags fail.
func (g *guardFlags) fitTTL(fs *flag.FlagSet, ttl *time.Duration, def time.Duration) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "ttl" })
	if !given {
		*ttl = min(def, g.maxTTL)
	}
}

// ttlUsage is the help of a --ttl flag whose default is def.
func ttlUsage(what string, def time.Duration) string {
	return fmt.Sprintf("%s\n(default %v, or --max-ttl if that is shorter)", what, def)
}

// checkTTL checks a lock TTL against --max-ttl.
func (g *guardFlags) checkTTL(ttl time.Duration) error {
	if ttl < limits.MinTTL {
		return usagef("--ttl %v: below the minimum %v", ttl, limits.MinTTL)
	}
	if ttl > g.maxTTL {
		return usagef("--ttl %v: above --max-ttl %v", ttl, g.maxTTL)
	}
	return nil
}

// notYet reports whether an obtain failed for reasons that pass with time:
// another owner holds the lock, or nodes are recovering after a restart.
func notYet(err error) bool {
	return errors.Is(err, redlock.ErrHeld) || errors.Is(err, redlock.ErrNodeRecovering)
}

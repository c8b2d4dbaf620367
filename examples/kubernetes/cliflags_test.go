package kubernetes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// redlockFlags are the flags of the redlock commands a manifest may run,
// each marked true when it is a boolean (it takes no separate value).
// TestFlagsAreTheCLIs checks them against the CLI's --help.
var redlockFlags = map[string]map[string]bool{
	"run": {
		"exclusive": true, "grace": false, "max-ttl": false, "next-nodes": false,
		"nodes": false, "owner": false, "password-file": false, "prefix": false,
		"restart-guard": false, "shared": true, "timeout": false, "tls-ca": false,
		"tls-cert": false, "tls-key": false, "ttl": false, "wait": false,
	},
	"doctor": {
		"drift": false, "json": true, "max-ttl": false, "next-nodes": false,
		"nodes": false, "password-file": false, "prefix": false,
		"restart-guard": false, "timeout": false, "tls-ca": false,
		"tls-cert": false, "tls-key": false, "ttl": false,
	},
	"inspect": {
		"json": true, "next-nodes": false, "nodes": false, "password-file": false,
		"prefix": false, "show-owner": true, "timeout": false, "tls-ca": false,
		"tls-cert": false, "tls-key": false,
	},
}

// The CLI's defaults (cmd/redlock) that the checks use.
const (
	defaultMaxTTL = time.Minute      // --max-ttl, WithMaxTTL
	maxMaxTTL     = time.Hour        // the largest --max-ttl
	defaultRunTTL = 30 * time.Second // run's --ttl, unless --max-ttl is shorter
	defaultGrace  = 5 * time.Second  // run's --grace, unless half of --ttl is shorter
)

// command is a redlock command line as redlock reads it: its command, the
// last value given to each flag (Go's flag package: -f and --f, -f=v and
// -f v, booleans without a value; flags end at the first argument that is
// not one, or at "--"), and what follows.
type command struct {
	name  string
	flags map[string]string
	args  []string // after the flags
	// run's lock name, and the command it runs.
	lock string
	argv []string
}

// parseRedlock reads argv, whose first element is redlock. Its errors are
// those for which redlock exits 2 (or prints its help), and commands the
// test does not know.
func parseRedlock(argv []string) (command, error) {
	if len(argv) < 2 {
		return command{}, errors.New("redlock without a command")
	}
	c := command{name: argv[1], flags: map[string]string{}}
	known, ok := redlockFlags[c.name]
	if !ok {
		return c, fmt.Errorf("redlock %s: a command the test does not know (it knows run, doctor and inspect)", c.name)
	}
	args, dashes, err := c.readFlags(argv[2:], known)
	if err != nil {
		return c, err
	}
	c.args = args
	if c.name == "run" {
		return c, c.parseRun(dashes, known)
	}
	return c, nil
}

// readFlags reads the flags at the start of args into c.flags, as Go's
// flag package does, and returns what follows them, and whether they
// ended at a "--".
func (c *command) readFlags(args []string, known map[string]bool) ([]string, bool, error) {
	for len(args) > 0 {
		a := args[0]
		if len(a) < 2 || a[0] != '-' {
			break
		}
		args = args[1:]
		if a == "--" {
			return args, true, nil
		}
		name := strings.TrimPrefix(a[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil, false, fmt.Errorf("redlock %s: bad flag syntax %q", c.name, a)
		}
		name, value, hasValue := strings.Cut(name, "=")
		isBool, ok := known[name]
		switch {
		case name == "help" || name == "h":
			return nil, false, fmt.Errorf("redlock %s %s prints its help and exits", c.name, a)
		case !ok:
			return nil, false, fmt.Errorf("redlock %s: unknown flag %s (it exits 2)", c.name, a)
		case isBool && !hasValue:
			value = "true"
		case isBool:
			if _, err := strconv.ParseBool(value); err != nil {
				return nil, false, fmt.Errorf("redlock %s: %s: not a boolean", c.name, a)
			}
		case !hasValue && len(args) == 0:
			return nil, false, fmt.Errorf("redlock %s: flag %s needs a value", c.name, a)
		case !hasValue:
			value, args = args[0], args[1:]
		}
		c.flags[name] = value
	}
	return args, false, nil
}

// parseRun reads run's NAME [flags] [--] COMMAND, as run does: flags that
// ended at a "--" (dashes) leave no NAME; flags may follow NAME, and end
// at a "--" or at the first word that is not one (so that "run job ls
// -l" keeps -l for ls).
func (c *command) parseRun(dashes bool, known map[string]bool) error {
	args := c.args
	if len(args) == 0 {
		return errors.New("redlock run: no lock NAME and COMMAND")
	}
	if dashes {
		return errors.New(`redlock run: no lock NAME before "--"`)
	}
	c.lock = args[0]
	args, _, err := c.readFlags(args[1:], known)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return errors.New("redlock run: no COMMAND after the lock name")
	}
	c.argv = args
	return nil
}

// duration is the value of a duration flag, or def when it is not given.
func (c command) duration(flag string, def time.Duration) (time.Duration, error) {
	v, ok := c.flags[flag]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("redlock %s --%s %q: %v", c.name, flag, v, err)
	}
	return d, nil
}

// settings are the values of a redlock command that the checks use, with
// the CLI's defaults.
type settings struct {
	maxTTL, ttl, grace, wait time.Duration
	guard                    string
}

// settings reads c's settings.
func (c command) settings() (settings, error) {
	var s settings
	var errs []error
	get := func(flag string, def time.Duration) time.Duration {
		d, err := c.duration(flag, def)
		errs = append(errs, err)
		return d
	}
	s.maxTTL = get("max-ttl", defaultMaxTTL)
	s.ttl = get("ttl", min(defaultRunTTL, s.maxTTL))
	s.grace = get("grace", min(defaultGrace, s.ttl/2))
	s.wait = get("wait", 0)
	s.guard = c.flags["restart-guard"]
	if s.guard == "" {
		s.guard = "on"
	}
	if s.maxTTL <= 0 || s.maxTTL > maxMaxTTL {
		errs = append(errs, fmt.Errorf("redlock %s --max-ttl %v: want above 0 and at most %v", c.name, s.maxTTL, maxMaxTTL))
	}
	if c.name == "run" {
		errs = append(errs, s.checkRun())
	}
	return s, errors.Join(errs...)
}

// checkRun refuses what run refuses.
func (s settings) checkRun() error {
	switch {
	case s.ttl < time.Second:
		return fmt.Errorf("redlock run --ttl %v: below run's minimum 1s", s.ttl)
	case s.ttl > s.maxTTL:
		return fmt.Errorf("redlock run --ttl %v: above --max-ttl %v", s.ttl, s.maxTTL)
	case s.grace <= 0 || s.grace >= s.ttl:
		return fmt.Errorf("redlock run --grace %v: want above 0 and below --ttl %v", s.grace, s.ttl)
	case s.wait < 0:
		return fmt.Errorf("redlock run --wait %v: negative", s.wait)
	}
	return nil
}

// nodeTimeout is the library's per-node timeout for a TTL
// (limits.NodeTimeout): TTL/20, at most 1 s.
func nodeTimeout(ttl time.Duration) time.Duration {
	t := min(ttl/20, time.Second)
	if t < 10*time.Millisecond {
		t = min(10*time.Millisecond, ttl/4)
	}
	return t
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/limits"
)

var runHelp = helpText{
	usage: "run [flags] NAME [flags] [--] COMMAND [ARGS...]",
	about: `A distributed flock(1): obtains the lock NAME (waiting up to --wait), keeps it
alive, runs COMMAND in its own process group and releases the lock when the
command and every process it left running in its group have exited, as
flock(1) holds the lock while any process that inherited it lives: with
sh -c 'job & echo started', the lock is held until job exits; run's exit
status is still the command's own. A process that leaves the group (setsid,
a daemon) is not waited for, and runs without the lock. The command's
environment has REDLOCK_NAME, REDLOCK_TOKEN (the lock's fencing token, a
decimal integer that increases from one holder to the next) and
REDLOCK_HELD=1, and neither REDLOCK_PASSWORD, REDLOCK_NODES nor
REDLOCK_NEXT_NODES. With --next-nodes (a move to another set of nodes,
docs/reconfiguration.md) the lock needs a quorum of each set.

--ttl is at least ` + minRunTTL.String() + `, above the library's minimum TTL: the lock must be
kept alive while the command runs, and on a loaded machine shorter locks
were lost (1 of 80 runs of "run --ttl 500ms -- sleep 2" on local nodes,
9 of 60 at 200ms).

If the lock is lost (no quorum confirmed a refresh in time), the command's
process group gets SIGTERM, then SIGKILL after --grace, whether the command
itself still runs or only what it left in its group. Until then it may
overlap with the next holder: protect the resource with the fencing token.
SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to redlock are forwarded to the group.
A forwarded SIGTERM is bounded like a lost lock's: what of the group is left
after --grace gets SIGKILL, and the lock is released: run ends within --grace
of a SIGTERM, plus a release round, whatever the command does with it.
If redlock itself is killed (kill -9, the OOM killer), a guardian process
that it started outside the group sends SIGKILL to the whole group, since
nothing keeps the lock alive any more (Unix; docs/cli.md, "Platforms").
On Windows, which has no process groups or SIGTERM, only the command's own
process is controlled: the lock is released when it exits, and it is killed
at once when the lock is lost.

By default the lock is a plain one: one holder at a time. --shared takes a
read lock of a read-write lock: any number of "run --shared" of one NAME run
at once, while no writer holds it. --exclusive takes its write lock: it waits
until no reader and no other writer holds NAME, and readers that come while it
waits wait behind it. --owner ID takes a reentrant lock held by ID: another
"run --owner ID" of NAME, from a nested script say, gets it too, while other
owners, writers and readers wait. The three exclude each other; a plain lock
and these never share a NAME (exit 75, "held by a lock of another kind").
Readers' tokens are not ordered among themselves; a writer's is above every
token given before it.

Exit status: the command's own (128+N if killed by signal N); 2 usage error,
or one redis-server given as two nodes (127.0.0.1 and localhost, a DNS
alias: the library compares the nodes' run_id at first contact); 69 fewer than a quorum of nodes reachable; 75 lock not obtained within --wait
(held elsewhere, or nodes recovering); 76 lock lost, command terminated;
77 authentication failed: a node refused the password or user (WRONGPASS,
NOAUTH) and fewer than a quorum accepted them; 126 command found but not
executable (no execute permission, a directory); 127 command not found, or
the interpreter its #! line names not found (as bash and dash exit).`,
}

const (
	defaultGrace  = 5 * time.Second
	defaultRunTTL = 30 * time.Second // unless --max-ttl is shorter
	// minRunTTL is the shortest --ttl of run, above the library's
	// limits.MinTTL, which bounds one obtain: run must keep the lock alive
	// for as long as the command runs, refreshing it every TTL/3 with a
	// per-node timeout of limits.NodeTimeout(TTL). Measured with
	// "run --ttl T -- sleep 2" on three idle local nodes of a 2-core
	// machine loaded by other work (load average 3 to 17): the lock was
	// lost in 20 of 20 runs at 10 ms, 16 of 20 at 30 ms, 15 of 20 at
	// 50 ms, 15 of 40 at 100 ms, 9 of 60 at 200 ms, 0 of 40 at 300 ms,
	// 1 of 80 at 500 ms, and 0 of 80 at 1 s.
	minRunTTL = time.Second
)

type runConfig struct {
	name   string
	argv   []string
	ttl    time.Duration
	wait   time.Duration
	grace  time.Duration
	prefix string
	// The lock's kind: at most one of shared, exclusive and owner (set
	// when ownerSet).
	shared, exclusive bool
	owner             string
	ownerSet          bool
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("run", stdout, stderr)
	fset := cmd.fs
	var (
		cfg runConfig
		nf  nodeFlags
		nx  nextFlag
		gf  guardFlags
	)
	fset.DurationVar(&cfg.ttl, "ttl", defaultRunTTL, ttlUsage(fmt.Sprintf("lock TTL, at least %v; the lock is refreshed every TTL/3", minRunTTL), defaultRunTTL))
	fset.DurationVar(&cfg.wait, "wait", 0, "how long to wait for the lock; 0 makes a single attempt")
	fset.DurationVar(&cfg.grace, "grace", defaultGrace, "time from SIGTERM to SIGKILL of the command's group, after the lock\nis lost or a SIGTERM to redlock was forwarded; below --ttl\n(default 5s, or half of --ttl if that is shorter)")
	fset.StringVar(&cfg.prefix, "prefix", limits.Prefix, "prefix of the lock's Redis key (WithPrefix)")
	fset.BoolVar(&cfg.shared, "shared", false, "take a shared (read) lock: readers of NAME run at once, writers wait")
	fset.BoolVar(&cfg.exclusive, "exclusive", false, "take the exclusive (write) lock of a read-write lock: no reader or other writer")
	fset.Func("owner", "take a reentrant lock held by owner `ID`: other runs with the same ID get it too\n(a job or request ID, never one shared by jobs that must exclude each other)", func(v string) error {
		cfg.owner, cfg.ownerSet = v, true
		return nil
	})
	nf.register(fset)
	nx.register(fset)
	gf.register(fset)
	ops, code, ok := cmd.parseMixed(runHelp, args, 1)
	if !ok {
		return code
	}
	if err := cfg.parseArgs(ops); err != nil {
		cmd.fail(exitUsage, "%v", err)
		fmt.Fprintln(cmd.stderr, `Run "redlock run --help" for usage.`)
		return exitUsage
	}
	gf.fitTTL(fset, &cfg.ttl, defaultRunTTL)
	graceSet := false
	fset.Visit(func(f *flag.Flag) { graceSet = graceSet || f.Name == "grace" })
	if !graceSet {
		cfg.grace = min(defaultGrace, cfg.ttl/2)
	}
	if err := cfg.validate(&gf); err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	opts, err := gf.options()
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	specs, _, err := nf.resolve()
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	next, _, err := nx.resolve(&nf)
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}

	// Registered before anything can block, so that a signal is never
	// lost; the channel is drained by the waits below.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	c, done, code := cmd.connect(ctx, specs, next, nf.timeout, append(opts, redlock.WithPrefix(cfg.prefix)))
	if c == nil {
		return code
	}
	defer done()

	lock, sig, err := obtainLock(ctx, c, cfg, sigs, func(err error) {
		cmd.say("waiting up to --wait %v for the lock: %v", cfg.wait, err)
	})
	switch {
	case sig != nil:
		return signalStatus(sig)
	case err != nil:
		return cmd.fail(obtainFailure(err, cfg.wait))
	}
	return cfg.supervise(ctx, lock, cmd, sigs)
}

// parseArgs takes NAME and COMMAND [ARGS...] from the operands of
// parseMixed: NAME, then flags or not, then COMMAND after a "--" or as
// the first word that is not a flag.
func (cfg *runConfig) parseArgs(ops operands) error {
	switch {
	case len(ops.names) == 0 && ops.dashed:
		return errors.New(`missing lock NAME before "--"`)
	case len(ops.names) == 0:
		return errors.New("missing lock NAME and COMMAND")
	}
	cfg.name = ops.names[0]
	if cfg.name == "-" {
		return fmt.Errorf("missing lock NAME before %q", cfg.name)
	}
	if len(ops.rest) == 0 {
		return errors.New("missing COMMAND after the lock name")
	}
	cfg.argv = ops.rest
	return nil
}

func (cfg *runConfig) validate(gf *guardFlags) error {
	var kinds []string
	if cfg.shared {
		kinds = append(kinds, "--shared")
	}
	if cfg.exclusive {
		kinds = append(kinds, "--exclusive")
	}
	if cfg.ownerSet {
		kinds = append(kinds, "--owner")
	}
	if len(kinds) > 1 {
		return usagef("%s exclude each other: give at most one", strings.Join(kinds, " and "))
	}
	if cfg.ownerSet && cfg.owner == "" {
		return usagef("--owner: empty owner ID")
	}
	if err := gf.checkTTL(cfg.ttl); err != nil {
		return err
	}
	if cfg.ttl < minRunTTL {
		return usagef("--ttl %v: below the minimum %v of run: a shorter lock is not reliably kept alive while the command runs (see --help)", cfg.ttl, minRunTTL)
	}
	if cfg.wait < 0 {
		return usagef("--wait %v: must not be negative", cfg.wait)
	}
	if err := positive("grace", cfg.grace); err != nil {
		return err
	}
	if cfg.grace >= cfg.ttl {
		return usagef("--grace %v: must be shorter than --ttl %v", cfg.grace, cfg.ttl)
	}
	return nil
}

// handle is the handle of the lock's kind.
func (cfg *runConfig) handle(c *redlock.Client) redlock.Locker {
	switch {
	case cfg.shared:
		r, _ := c.RWMutex(cfg.name)
		return r
	case cfg.exclusive:
		_, w := c.RWMutex(cfg.name)
		return w
	case cfg.ownerSet:
		return c.Reentrant(cfg.name, cfg.owner)
	}
	return c.Mutex(cfg.name)
}

// obtainLock obtains the lock with automatic refresh, within cfg.wait. A
// signal ends the wait: it is returned, and no lock.
// waiting is called, from another goroutine, when the first attempt
// found nodes recovering and Obtain waits for them.
func obtainLock(ctx context.Context, c *redlock.Client, cfg runConfig, sigs <-chan os.Signal, waiting func(error)) (*redlock.Lock, os.Signal, error) {
	octx, cancel := context.WithCancel(ctx)
	if cfg.wait > 0 {
		octx, cancel = context.WithTimeout(ctx, cfg.wait)
	}
	defer cancel()
	type result struct {
		lock *redlock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		h := cfg.handle(c)
		r.lock, r.err = h.TryObtain(octx, cfg.ttl, redlock.WithAutoRefresh())
		if r.err != nil && cfg.wait > 0 && ctx.Err() == nil && !errors.Is(r.err, redlock.ErrWrongKind) {
			if errors.Is(r.err, redlock.ErrNodeRecovering) {
				// Nodes just started or restarted refuse every lock
				// for the max TTL: say so, rather than wait in silence.
				waiting(r.err)
			}
			r.lock, r.err = h.Obtain(octx, cfg.ttl, redlock.WithAutoRefresh())
		}
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() != nil {
			// Ended by main's signal context: the signal is in sigs too.
			select {
			case sig := <-sigs:
				return nil, sig, nil
			default:
			}
		}
		return r.lock, nil, r.err
	case sig := <-sigs:
		cancel()
		if r := <-done; r.lock != nil {
			_ = r.lock.Release(context.WithoutCancel(ctx))
		}
		return nil, sig, nil
	}
}

// obtainFailure maps an error of Obtain to an exit code and message.
func obtainFailure(err error, wait time.Duration) (int, string, error) {
	switch {
	case errors.Is(err, redlock.ErrInvalid):
		return exitUsage, "%v", err
	case errors.Is(err, redlock.ErrWrongKind):
		// Waiting would not help: a plain lock and the family
		// (--shared, --exclusive, --owner) never share a name.
		return exitNotObtained, "lock not obtained: %v", err
	case authFailed(err):
		return exitAuth, "nodes refused the credentials: %v", err
	case errors.Is(err, redlock.ErrBreakerOpen):
		// The Client's circuit breaker: fewer than a quorum of nodes
		// reachable, whether or not --wait ran out meanwhile.
		return exitUnavailable, "fewer than a quorum of nodes reachable: %v", err
	case notYet(err) || errors.Is(err, context.DeadlineExceeded):
		within := "at once"
		if wait > 0 {
			within = "within " + wait.String()
		}
		return exitNotObtained, "lock not obtained " + within + ": %v", err
	}
	return exitUnavailable, "no quorum of nodes could take the lock: %v", err
}

// supervise runs the command while the lock is held, and releases it.
func (cfg *runConfig) supervise(ctx context.Context, lock *redlock.Lock, inv *invocation, sigs <-chan os.Signal) int {
	out, stderr := inv.out, inv.stderr
	lost := false
	defer func() {
		err := lock.Release(context.WithoutCancel(ctx))
		switch {
		case lost:
		case errors.Is(err, redlock.ErrNotHeld):
			// It never ran out here, yet the nodes no longer held it: an
			// assumption of the safety model was broken (docs/safety.md).
			inv.say("the nodes no longer held the lock when the command ended: %v", err)
		case err != nil:
			inv.say("release (keys left behind expire with their TTL): %v", err)
		}
	}()
	cmd, fg := cfg.command(lock, out)
	// The guardian kills the group if redlock dies without ending it.
	guard, err := startGuardian()
	if err != nil {
		inv.say("cannot start the guardian process, which kills the command's group if redlock is killed: %v", err)
		return exitError
	}
	defer guard.stand()
	if err := cmd.Start(); err != nil {
		code, msg := startFailure(cmd.Path, err)
		say(stderr, "run", "%s", msg)
		return code
	}
	if fg {
		defer takeTerminal(os.Stdin)
	}
	job := newJob(cmd.Process)
	if err := guard.watch(cmd.Process.Pid); err != nil {
		inv.say("the guardian process, which kills the command's group if redlock is killed, is gone (%v): ending the command", err)
		job.kill()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	waitErr, lost := cfg.await(lock, inv, job, exited, sigs)
	if lost {
		say(stderr, "run", "lock %q lost while the command ran", cfg.name)
		return exitLost
	}
	return exitStatus(waitErr, stderr)
}

// await waits while the command runs: it forwards signals, bounds a
// SIGTERM and a lost lock by --grace, and returns once the command and
// every process of its group have ended (or were killed), with the
// command's own result, and whether the lock was lost.
func (cfg *runConfig) await(lock *redlock.Lock, inv *invocation, job job, exited <-chan error, sigs <-chan os.Signal) (waitErr error, lost bool) {
	// The lock is held while any process of the command's group lives:
	// after the command exits, until what it left running in its group
	// has exited too (polled), as flock(1) holds while an inheritor of
	// its descriptor lives.
	var (
		leaderExited = exited
		kill         = time.NewTimer(time.Hour) // armed by arm
		killC        <-chan time.Time
		armed        bool
		pollC        <-chan time.Time
		held         = lock.Done()
	)
	kill.Stop()
	defer kill.Stop()
	// arm starts --grace, after which the group gets SIGKILL.
	arm := func() {
		if !armed {
			armed, killC = true, kill.C
			kill.Reset(cfg.grace)
		}
	}
loop:
	for {
		select {
		case waitErr = <-leaderExited:
			leaderExited = nil
			if job.gone() {
				break loop
			}
			poll := time.NewTicker(groupPoll)
			defer poll.Stop()
			pollC = poll.C
		case <-pollC:
			if job.gone() {
				break loop
			}
		case sig := <-sigs:
			job.signal(sig)
			if sig == syscall.SIGTERM {
				// A SIGTERM asks for an end within a bound (a
				// supervisor's, a Pod's grace period): --grace.
				arm()
			}
		case <-held:
			held = nil
			if err := lock.Err(); errors.Is(err, redlock.ErrLost) {
				lost = true
				inv.say("%v: sending SIGTERM to the command, SIGKILL in %v", err, cfg.grace)
				job.terminate()
				arm()
			}
		case <-killC:
			killC = nil
			say(inv.stderr, "run", "the command's group outlived --grace %v after SIGTERM: sending SIGKILL", cfg.grace)
			job.kill()
			if leaderExited == nil {
				break loop // the rest of the group was killed
			}
		}
	}
	return waitErr, lost
}

// command is the command to run under the lock: in its own process
// group, killed if redlock dies, with the terminal when redlock has it (fg:
// jobAttr; redlock takes the terminal back afterwards), the lock in its
// environment.
func (cfg *runConfig) command(lock *redlock.Lock, out *outputs) (cmd *exec.Cmd, fg bool) {
	cmd = exec.Command(cfg.argv[0], cfg.argv[1:]...)
	cmd.Env = childEnv(os.Environ(), cfg.name, lockToken(lock))
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = out.child()
	fg = foregroundTerminal(os.Stdin)
	cmd.SysProcAttr = jobAttr(fg, os.Stdin)
	// Output copied through pipes (when stdout is not a file) must not
	// keep redlock waiting on a descendant that escaped the group.
	cmd.WaitDelay = time.Second
	return cmd, fg
}

// groupPoll is how often run checks whether the command's process group
// has ended, after the command itself exited.
const groupPoll = 20 * time.Millisecond

// startFailure is the exit code and message of a command that could not
// be started, as bash (5.2) and dash exit: 127 when it is not found, or
// when the file exists but its interpreter does not (exec fails with "no
// such file": the #! line's interpreter, or a binary's loader); 126 when
// it is found but cannot be executed (no execute permission, a directory).
func startFailure(path string, err error) (int, string) {
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, exec.ErrNotFound) {
		if _, serr := os.Stat(path); serr == nil {
			return exitNotFound, fmt.Sprintf("%s: cannot execute: its interpreter (the one its #! line names, or a binary's loader) was not found", path)
		}
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound, err.Error()
	}
	return exitCannotExec, err.Error()
}

// exitStatus is the command's status as a shell reports it.
func exitStatus(err error, stderr io.Writer) int {
	var ee *exec.ExitError
	switch {
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		return exitOK
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	say(stderr, "run", "%v", err)
	return exitError
}

func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitError
}

// childEnv is the command's environment: redlock's own, without the
// credentials, with the lock's variables.
func childEnv(env []string, name, token string) []string {
	drop := []string{envPassword, envNodes, envNextNodes, envGuardian, "REDLOCK_NAME", "REDLOCK_TOKEN", "REDLOCK_HELD"}
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			if k == d {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, "REDLOCK_NAME="+name, "REDLOCK_TOKEN="+token, "REDLOCK_HELD=1")
}

// lockToken is the value of REDLOCK_TOKEN: the lock's fencing token, in
// decimal.
func lockToken(l *redlock.Lock) string {
	return strconv.FormatInt(l.Token(), 10)
}

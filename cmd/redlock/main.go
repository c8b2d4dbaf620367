// Command redlock works with distributed locks on Redis.
//
//	redlock run      run a command while holding a lock (a distributed flock)
//	redlock inspect  show a lock's state on every node
//	redlock doctor   check a deployment against the assumptions of Redlock
//	redlock bench    measure throughput and latency
//	redlock demo     a flash sale on five local Redis nodes, with faults
//	redlock plan     how many nodes: the chance of no quorum, the validity left
//
// Nodes are Redis URLs given with --nodes or REDLOCK_NODES; passwords come
// from the URLs, --password-file or REDLOCK_PASSWORD and are never printed
// nor passed to the command that run starts.
//
// Exit codes:
//
//	0    success; for run, the command's own status when it ran
//	1    the command failed (doctor: a check failed, or DEGRADED: a node
//	     does not vote, a quorum does; demo: the sale did not
//	     sell out, or oversold under the lock; plan: no number of nodes
//	     meets --target)
//	2    usage: bad flags, arguments, node URLs or password file, or a
//	     database index (redis://host/99) that the servers do not have
//	69   fewer than a quorum of nodes could be reached (sysexits EX_UNAVAILABLE);
//	     doctor: fewer than a quorum of nodes vote now (down, or recovering
//	     under the restart guard)
//	77   a node refused the credentials (WRONGPASS, NOAUTH: a wrong or missing
//	     password or user), and fewer than a quorum answered (sysexits
//	     EX_NOPERM)
//	75   run: the lock was not obtained within --wait (sysexits EX_TEMPFAIL)
//	76   run: the lock was lost; the command was terminated
//	126  run: the command was found but could not be executed (no
//	     execute permission, a directory)
//	127  run: the command was not found, or the interpreter its #! line
//	     names was not found (as bash and dash exit)
//
// Run "redlock help" for the list of subcommands, "redlock version" (or
// "redlock --version") for the version, commit and Go release the binary
// was built from, read from its build information.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// Exit codes; see the package documentation.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitUnavailable = 69
	exitNotObtained = 75
	exitLost        = 76
	exitAuth        = 77
	exitCannotExec  = 126
	exitNotFound    = 127
)

func main() {
	if run, ok := isGuardian(); ok {
		os.Exit(guardianMain(run, os.Stdin, os.Stderr))
	}
	// go-redis logs every failed dial; the demo kills nodes on purpose, and
	// the commands report node errors themselves.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run a command while holding a lock; terminate it if the lock is lost", runRun},
		{"inspect", "show a lock's state on every node", runInspect},
		{"doctor", "check a deployment against the assumptions of Redlock", runDoctor},
		{"bench", "measure lock throughput and latency", runBench},
		{"demo", "run a flash sale on local Redis nodes, with a node killed and one frozen midway", runDemo},
		{"plan", "how many nodes: the chance of no quorum, the nodes a target needs, the validity left", runPlan},
	}
}

// run is the whole command line program; main only wires it to the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		if len(args) > 1 {
			fmt.Fprintf(stderr, "redlock version: unexpected argument %q\n", args[1])
			return exitUsage
		}
		printVersion(stdout)
		return exitOK
	}
	if args[0] == "help" {
		if len(args) == 1 {
			usage(stdout)
			return exitOK
		}
		args = []string{args[1], "--help"}
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "redlock: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: redlock <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Nodes are Redis URLs, comma-separated, given with --nodes or REDLOCK_NODES:")
	fmt.Fprintln(w, "  redis://[user:password@]host:port[/db]     a standalone server")
	fmt.Fprintln(w, "  rediss://...                               the same over TLS")
	fmt.Fprintln(w, "  redis-sentinel://[:password@]host:port[,host:port]/mastername[?sentinel_password=...]")
	fmt.Fprintln(w, "  redis-cluster://[:password@]host:port[,host:port]")
	fmt.Fprintln(w, "  rediss-sentinel://..., rediss-cluster://...  the same over TLS (?skip_verify=true")
	fmt.Fprintln(w, "                                             accepts any certificate)")
	fmt.Fprintln(w, "TLS with a private CA or client certificates: --tls-ca, --tls-cert, --tls-key, or")
	fmt.Fprintln(w, "the URL's ?tls_ca=FILE&tls_cert=FILE&tls_key=FILE for one node.")
	fmt.Fprintln(w, "The password in a URL is the master's (the cluster's); sentinel_username and")
	fmt.Fprintln(w, "sentinel_password are the sentinels' own. A password missing from a URL is read")
	fmt.Fprintln(w, "from --password-file, else REDLOCK_PASSWORD.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit codes: 0 success (run: the command's status), 1 failure, 2 usage,")
	fmt.Fprintln(w, "69 nodes unreachable, 75 lock not obtained in time, 76 lock lost,")
	fmt.Fprintln(w, "77 authentication failed (wrong or missing password),")
	fmt.Fprintln(w, "126 command not executable, 127 command not found.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "redlock <command> --help" for the flags of a command,`)
	fmt.Fprintln(w, `"redlock version" (or --version) for the build's version and commit.`)
}

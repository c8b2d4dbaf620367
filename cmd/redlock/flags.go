package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// helpText describes a subcommand for its --help.
type helpText struct {
	usage string // after "redlock ", e.g. "run [flags] NAME -- COMMAND [ARGS...]"
	about string // paragraphs, already wrapped
}

// invocation is what a command that talks to nodes starts from: its writers,
// with its own messages scrubbed of the node secrets once they are known
// (hide), and its flag set.
type invocation struct {
	name           string
	out            *outputs
	stdout, stderr io.Writer // the command's own messages
	fs             *flag.FlagSet
}

// newInvocation starts the command name: its writers and its flag set.
func newInvocation(name string, stdout, stderr io.Writer) *invocation {
	cmd := &invocation{name: name, out: newOutputs(stdout, stderr)}
	cmd.stdout, cmd.stderr = cmd.out.own(nil)
	cmd.fs = newFlagSet(name, cmd.stderr)
	return cmd
}

// parse parses args like parseFlags.
func (cmd *invocation) parse(help helpText, args []string) (code int, ok bool) {
	return parseFlags(cmd.fs, help, args, cmd.stdout, cmd.stderr)
}

// hide scrubs secrets from the command's own messages from now on.
func (cmd *invocation) hide(secrets []string) { cmd.stdout, cmd.stderr = cmd.out.own(secrets) }

// fail prints "redlock NAME: " and the message on the command's stderr,
// and returns code.
func (cmd *invocation) fail(code int, format string, args ...any) int {
	fmt.Fprintf(cmd.stderr, "redlock "+cmd.name+": "+format+"\n", args...)
	return code
}

// newFlagSet returns a flag set whose errors go to stderr and whose help is
// printed by parseFlags, not by the flag package.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args. It returns ok when the command should go on;
// otherwise the exit code: exitOK after --help (printed to stdout), or
// exitUsage after a bad flag (the flag package has said which).
func parseFlags(fs *flag.FlagSet, help helpText, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, fs, help)
		return exitOK, false
	}
	fmt.Fprintf(stderr, "Run \"%s --help\" for usage.\n", fs.Name())
	return exitUsage, false
}

// printHelp prints the usage line, the description and every flag with its
// default, including the zero defaults that flag.PrintDefaults leaves out.
func printHelp(w io.Writer, fs *flag.FlagSet, help helpText) {
	fmt.Fprintf(w, "Usage: redlock %s\n", help.usage)
	if help.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(help.about, "\n"))
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if typ != "" {
			typ = " " + typ
		}
		def := f.DefValue
		switch {
		case def == "":
			def = "none"
		case isStringFlag(f):
			def = fmt.Sprintf("%q", def)
		}
		fmt.Fprintf(w, "  --%s%s\n", f.Name, typ)
		for line := range strings.SplitSeq(usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		if !strings.Contains(usage, "(default") {
			fmt.Fprintf(w, "        (default %s)\n", def)
		}
	})
}

func isStringFlag(f *flag.Flag) bool {
	typ, _ := flag.UnquoteUsage(f)
	return typ == "string"
}

// usageError is an error in what the user gave: flags, arguments, URLs.
// It makes the command exit with exitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// positive checks that a duration flag is above zero.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usagef("--%s %v: must be positive", name, d)
	}
	return nil
}

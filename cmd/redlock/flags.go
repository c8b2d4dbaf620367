package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// helpText describes a subcommand for its --help.
type helpText struct {
	usage string // after "redlock ", e.g. "run [flags] NAME -- COMMAND [ARGS...]"
	about string // paragraphs, already wrapped
}

// invocation is what a command that talks to nodes starts from: its writers
// and its flag set.
type invocation struct {
	name           string
	out            *outputs
	stdout, stderr io.Writer // the command's own messages
	fs             *flag.FlagSet
	// labels name the Client's nodes by index, for its errors (explain);
	// set by connect.
	labels []string
}

// newInvocation starts the command name: its writers and its flag set.
func newInvocation(name string, stdout, stderr io.Writer) *invocation {
	cmd := &invocation{name: name, out: newOutputs(stdout, stderr)}
	cmd.stdout, cmd.stderr = cmd.out.own()
	cmd.fs = newFlagSet(name)
	return cmd
}

// parse parses args like parseFlags.
func (cmd *invocation) parse(help helpText, args []string) (code int, ok bool) {
	return parseFlags(cmd.fs, help, args, cmd.stdout, cmd.stderr)
}

// operands is what parseMixed leaves of the arguments once the flags are
// taken out.
type operands struct {
	// names are the operands among the flags (run's and inspect's NAME).
	names []string
	// rest follows the last name: after a "--", or after names reached
	// its limit and a word that is not a flag came (run's COMMAND).
	rest []string
	// dashed is set when the flags ended at a "--".
	dashed bool
}

// parseMixed parses args like parse, but accepts flags among and after
// the operands, as most command line tools do: "run NAME --ttl 5s --
// cmd" is "run --ttl 5s NAME -- cmd". Up to maxNames operands are taken
// as names, each one possibly followed by more flags; after the last
// name, a word that does not start with "-" begins rest, so that the
// flags of a command given without "--" ("run NAME ls -l") stay its own.
// A "--" ends the flags. Negative maxNames takes every operand as a name.
func (cmd *invocation) parseMixed(help helpText, args []string, maxNames int) (ops operands, code int, ok bool) {
	for {
		if code, ok := cmd.parse(help, args); !ok {
			return ops, code, false
		}
		dashed := endedByDashes(cmd.fs, args)
		args = cmd.fs.Args()
		switch {
		case dashed:
			ops.rest, ops.dashed = args, true
			return ops, 0, true
		case len(args) == 0:
			return ops, 0, true
		case maxNames >= 0 && len(ops.names) == maxNames && !flagLike(args[0]):
			ops.rest = args
			return ops, 0, true
		case maxNames >= 0 && len(ops.names) == maxNames:
			// More flags after the last name.
		default:
			ops.names = append(ops.names, args[0])
			args = args[1:]
		}
	}
}

// flagLike reports whether a word would be parsed as a flag (or the "--"
// that ends them): it starts with "-" and is not "-" alone.
func flagLike(a string) bool { return len(a) > 1 && a[0] == '-' }

// fail prints "redlock NAME: " and the message on the command's stderr,
// and returns code.
func (cmd *invocation) fail(code int, format string, args ...any) int {
	cmd.say(format, args...)
	return code
}

// say prints one message like say, on the command's stderr, with its
// errors explained with the labels of its nodes.
func (cmd *invocation) say(format string, args ...any) {
	say(cmd.stderr, cmd.name, format, explainArgs(args, cmd.labels)...)
}

// say prints one message of the command name on w: "redlock NAME: " and
// the message, without the "redlock: " that the library's errors start
// with (the line says it already). Errors among args are explained
// (explain), so that the message is one line.
func say(w io.Writer, name, format string, args ...any) {
	msg := fmt.Sprintf(format, explainArgs(args, nil)...)
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, libPrefix), ": "+libPrefix, ": ")
	fmt.Fprintf(w, "redlock %s: %s\n", name, msg)
}

// libPrefix starts the library's error messages.
const libPrefix = "redlock: "

// newFlagSet returns a flag set whose help and errors are printed by
// parseFlags, not by the flag package.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args. It returns ok when the command should go on;
// otherwise the exit code: exitOK after --help (printed to stdout), or
// exitUsage after a bad flag (said on stderr).
func parseFlags(fs *flag.FlagSet, help helpText, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, fs, help)
		return exitOK, false
	}
	say(stderr, fs.Name(), "%s", flagError(fs, err))
	fmt.Fprintf(stderr, "Run \"redlock %s --help\" for usage.\n", fs.Name())
	return exitUsage, false
}

// The flag package's errors (Go 1.26, flag/flag.go), which name a flag with
// one dash and, for numbers and durations, give "parse error" as the reason.
var (
	flagInvalid    = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-(\S+): (.*)$`)
	flagUndefined  = regexp.MustCompile(`^flag provided but not defined: -(\S+)$`)
	flagNeedsValue = regexp.MustCompile(`^flag needs an argument: -(\S+)$`)
)

// flagError rewords an error of fs.Parse: flags named as they are written
// (--ttl), and the reason a value was refused.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := flagInvalid.FindStringSubmatch(msg); m != nil {
		value, uerr := strconv.Unquote(m[1])
		if uerr != nil {
			value = m[1]
		}
		return fmt.Sprintf("--%s %q: %s", m[2], value, valueError(fs.Lookup(m[2]), value, m[3]))
	}
	if m := flagUndefined.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown flag --%s", m[1])
	}
	if m := flagNeedsValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("flag --%s needs a value", m[1])
	}
	return msg
}

// valueError is why value is not one of f's: the parser's own error where
// the flag package replaced it with "parse error" or "value out of range",
// else reason.
func valueError(f *flag.Flag, value, reason string) string {
	if f == nil {
		return reason
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return reason
	}
	var err error
	switch g.Get().(type) {
	case time.Duration:
		_, err = time.ParseDuration(value)
	case bool:
		_, err = strconv.ParseBool(value)
	case int, int64:
		_, err = strconv.ParseInt(value, 0, 64)
	case uint, uint64:
		_, err = strconv.ParseUint(value, 0, 64)
	case float64:
		_, err = strconv.ParseFloat(value, 64)
	}
	if err == nil {
		return reason
	}
	return err.Error()
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

// endedByDashes reports whether fs.Parse(args) stopped at a "--" (which
// the flag package drops), rather than at the first argument that is not a
// flag. It follows the flag package's rules: a "--" that is the value of
// the flag before it (--owner --) does not end the flags.
func endedByDashes(fs *flag.FlagSet, args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return true
		}
		if len(a) < 2 || a[0] != '-' {
			return false
		}
		name := strings.TrimPrefix(a[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
		}
		i++ // the flag's value
	}
	return false
}

// positive checks that a duration flag is above zero.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usagef("--%s %v: must be positive", name, d)
	}
	return nil
}

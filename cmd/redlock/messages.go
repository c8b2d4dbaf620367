package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/redlock-go/redlock"
)

// shown is an error as the command prints it (explain); it wraps the
// error, so that errors.Is and errors.As still see through it.
type shown struct {
	msg string
	err error
}

func (e *shown) Error() string { return e.msg }
func (e *shown) Unwrap() error { return e.err }

// explain rewords an error for the command's output, on one line:
//   - the parts of a joined error (errors.Join prints one per line) are
//     joined with "; ", and a bare context.DeadlineExceeded or Canceled
//     among them is left out: the sentence that prints the error says
//     what ran out ("lock not obtained within 1s: ...");
//   - a node of a QuorumError is named by labels[i] (the command's label:
//     a Sentinel node's sentinels and master, where the library knows
//     only "FailoverClient");
//   - the Lua internals of a script's error (its SHA and line) are cut.
func explain(err error, labels []string) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*shown); ok {
		return err
	}
	msg := render(err)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			if n.Node >= 0 && n.Node < len(labels) && labels[n.Node] != n.Addr {
				msg = strings.Replace(msg, fmt.Sprintf("node %d (%s): ", n.Node, n.Addr), fmt.Sprintf("node %d (%s): ", n.Node, labels[n.Node]), 1)
			}
		}
	}
	msg = stripLua(msg)
	msg = strings.ReplaceAll(msg, "\n", "; ")
	return &shown{msg: msg, err: err}
}

// render is err's message with the parts of a joined error on one line.
func render(err error) string {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || !isJoin(err, j.Unwrap()) {
		return err.Error()
	}
	var parts []string
	for _, e := range j.Unwrap() {
		if e == context.DeadlineExceeded || e == context.Canceled {
			continue
		}
		parts = append(parts, render(e))
	}
	if len(parts) == 0 {
		return err.Error()
	}
	return strings.Join(parts, "; ")
}

// isJoin reports whether err prints as errors.Join does: its parts, one
// per line.
func isJoin(err error, parts []error) bool {
	s := make([]string, 0, len(parts))
	for _, e := range parts {
		if e != nil {
			s = append(s, e.Error())
		}
	}
	return err.Error() == strings.Join(s, "\n")
}

// Lua internals that Redis appends to, or puts before, a script's error:
// Redis 7 " script: <sha>, on @user_script:<line>." and "user_script:<line>: ",
// Redis 6 "Error running script (call to f_<sha>): @user_script:<line>: ".
var luaInternals = regexp.MustCompile(`\s*script: [0-9a-f]{40}, on @user_script:\d+\.?|Error running script \(call to f_[0-9a-f]{40}\): @user_script:\d+: |@?user_script:\d+: `)

func stripLua(msg string) string { return luaInternals.ReplaceAllString(msg, "") }

// explainArgs explains every error among args.
func explainArgs(args []any, labels []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if err, ok := a.(error); ok {
			a = explain(err, labels)
		}
		out[i] = a
	}
	return out
}

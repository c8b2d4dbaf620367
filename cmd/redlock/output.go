package main

import (
	"encoding/json"
	"io"
	"os"
	"sync"
)

// lockedWriter serializes writes to w under mu, so that the command's
// messages and a child's copied output do not interleave mid-line.
//
// Nothing is scrubbed from the text: a password is never formatted into a
// message (node labels have no credentials, URLs in errors are redacted
// field by field, see redact), and searching the text for a password would
// tell a reader the password by what vanished.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// outputs are the writers of one command: its own messages go through
// lockedWriters; a child's output goes to the original files, or through
// the same lock when they are not files, so that writes never race.
type outputs struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func newOutputs(stdout, stderr io.Writer) *outputs {
	return &outputs{stdout: stdout, stderr: stderr}
}

// own returns the writers for the command's own messages.
func (o *outputs) own() (stdout, stderr io.Writer) {
	return lockedWriter{&o.mu, o.stdout}, lockedWriter{&o.mu, o.stderr}
}

// child returns the writers for a child process.
func (o *outputs) child() (stdout, stderr io.Writer) {
	wrap := func(w io.Writer) io.Writer {
		if f, ok := w.(*os.File); ok {
			return f
		}
		return lockedWriter{&o.mu, w}
	}
	return wrap(o.stdout), wrap(o.stderr)
}

// printJSON writes the command's report v as indented JSON to its stdout.
// When it cannot, it says so and returns false.
func (cmd *invocation) printJSON(v any) bool {
	enc := json.NewEncoder(cmd.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		cmd.fail(0, "%v", err)
		return false
	}
	return true
}

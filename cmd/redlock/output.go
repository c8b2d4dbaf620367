package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
)

// scrub replaces every secret in s. Secrets shorter than minSecret are
// left: replacing them would garble the output without hiding anything.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= minSecret {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}

const minSecret = 4

// scrubWriter removes secrets from what the commands print themselves (not
// from a child's output), as a second line of defence behind never
// formatting a password. It serializes writes, so that the command's
// messages and a child's copied output do not interleave mid-line.
type scrubWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	secrets []string
}

func (s scrubWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := scrub(string(p), s.secrets)
	if _, err := io.WriteString(s.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// outputs are the writers of one command: its own messages go through
// scrubWriters; a child's output goes to the original files, or through
// the same lock when they are not files, so that writes never race.
type outputs struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func newOutputs(stdout, stderr io.Writer) *outputs {
	return &outputs{stdout: stdout, stderr: stderr}
}

// own returns the writers for the command's own messages.
func (o *outputs) own(secrets []string) (stdout, stderr io.Writer) {
	return scrubWriter{&o.mu, o.stdout, secrets}, scrubWriter{&o.mu, o.stderr, secrets}
}

// child returns the writers for a child process.
func (o *outputs) child() (stdout, stderr io.Writer) {
	wrap := func(w io.Writer) io.Writer {
		if f, ok := w.(*os.File); ok {
			return f
		}
		return scrubWriter{&o.mu, w, nil}
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

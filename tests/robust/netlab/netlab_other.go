//go:build !linux

package netlab

import (
	"errors"
	"os/exec"
)

// Lab is a set of network namespaces: Linux only.
type Lab struct{}

var errLinux = errors.New("netlab: network namespaces need Linux")

// New fails: network namespaces need Linux.
func New(names []string, seed uint64) (*Lab, error) { return nil, errLinux }

func (l *Lab) Set(from, to string, p Policy) error { return errLinux }
func (l *Lab) SetBoth(a, b string, p Policy) error { return errLinux }
func (l *Lab) ClearAll()                           {}
func (l *Lab) Addr(name string) string             { return "" }
func (l *Lab) NS(name string) string               { return "" }
func (l *Lab) Command(name, program string, args ...string) *exec.Cmd {
	return exec.Command(program, args...)
}
func (l *Lab) Stats() (forwarded, dropped int64) { return 0, 0 }
func (l *Lab) Close() error                      { return nil }

// Sweep does nothing off Linux.
func Sweep() {}

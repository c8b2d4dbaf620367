//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import "io"

// guardian does nothing where there are no process groups (Windows): the
// command is not killed when redlock run is killed.
type guardian struct{}

func startGuardian() (*guardian, error) { return &guardian{}, nil }

func (*guardian) watch(int) error { return nil }

func (*guardian) stand() {}

func guardianMain(string, io.Reader, io.Writer) int { return 0 }

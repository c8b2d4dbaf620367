// Package repro holds the reproductions that need more than one OS
// process: the test binary re-executes itself as a second client (see
// TestMain), which a test can hand a lock to, or pause as a whole. They use
// only the public API of package redlock, on real redis-server nodes.
//
//	go test ./tests/repro -race -run TestHandoffAcrossProcesses
//
// They run in the rest lane of make test (scripts/test-lanes.sh), with the
// root module's other packages.
package repro

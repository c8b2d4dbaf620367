// Package fault is the fault-injection suite of redlock: clients (goroutines
// and separate OS processes) increment a counter in a fenced store under the
// lock while nodes crash, freeze, lose their network or see their clocks
// drift, and a checker counts what went wrong. See docs/fault-testing.md.
//
// The package holds only tests; run them with
//
//	go test ./tests/fault -race -run 'TestScenarios/<name>' -fault.duration 10s
package fault

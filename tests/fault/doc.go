// Package fault is the fault-injection suite of redlock: clients (goroutines
// and separate OS processes) increment a counter in a fenced store under the
// lock while nodes crash, freeze, lose their network or see their clocks
// drift, and a checker counts what went wrong. See docs/fault-testing.md.
//
// Its own tests run every scenario on the go-redis driver:
//
//	go test ./tests/fault -race -run 'TestScenarios/<name>' -fault.duration 10s
//
// The suite runs on any driver (package driver): a test binary gives the
// driver to Main in its TestMain and calls Run, as the modules of the
// redigo and rueidis drivers do:
//
//	func TestMain(m *testing.M) { fault.Main(m, fault.Driver{Name: "mydriver", Standalone: ...}) }
//
//	func TestFaults(t *testing.T) { fault.Run(t, "baseline", "partition-majority") }
package fault

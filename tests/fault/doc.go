// Package fault is the fault-injection suite of redlock: clients (goroutines
// and separate OS processes) increment a counter in a fenced store under the
// lock while nodes crash, freeze, lose their network or see their clocks
// drift, and a checker counts what went wrong. See docs/fault-testing.md.
//
// The store is package fence's Redis record (fence.Redis, through
// examples/fenced-storage/store): the counter and its fence in one hash,
// checked in one script, with the counts of accepted and refused
// operations from which the checker reads "stale rejected" and the lost
// updates. The control-unfenced scenarios turn the check off: every client
// writes with one constant token, which the fence accepts (equal tokens
// pass), as a store without fencing would.
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

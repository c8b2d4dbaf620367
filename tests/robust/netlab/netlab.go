// Package netlab builds a network of Linux network namespaces for the
// robustness suite, with faults on each directed link between two of them:
// packets dropped (a partition that closes no connection), lost at random,
// or delayed with jitter (which also reorders them).
//
// Each namespace has one TUN device, and so has the namespace of the test
// process (the root); every packet between them is read from its sender's
// TUN by the lab, in the test process, and written to its receiver's TUN
// after the link's policy has been applied. The kernels of the namespaces
// see a real IPv4 network: TCP retransmits, times out and reorders as over a
// wire. (tc netem would do the same in the kernel, but the kernels this
// suite runs on are built without sch_netem; see docs/fault-testing.md.)
//
// A Lab needs Linux, root (CAP_NET_ADMIN and CAP_SYS_ADMIN), /dev/net/tun
// and the ip command (iproute2). New fails with an error that says which is
// missing. Namespaces and devices carry a prefix unique to the Lab; Close
// removes them, and Sweep removes those of labs whose process has died.
package netlab

import (
	"fmt"
	"time"
)

// Policy is what happens to the packets of one directed link.
type Policy struct {
	Drop   bool          // every packet is dropped: a partition
	Loss   float64       // the share of packets dropped at random, 0 to 1
	Delay  time.Duration // added to every packet
	Jitter time.Duration // a uniform random extra delay in [0, Jitter)
}

// IsZero reports whether p leaves packets alone.
func (p Policy) IsZero() bool { return p == Policy{} }

func (p Policy) String() string {
	switch {
	case p.Drop:
		return "drop"
	case p.IsZero():
		return "clear"
	}
	return fmt.Sprintf("loss %.0f%% delay %v jitter %v", 100*p.Loss, p.Delay, p.Jitter)
}

// Root is the name of the test process's own namespace in a Lab.
const Root = "root"

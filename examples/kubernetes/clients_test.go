package kubernetes

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// workload is an object whose Pods run containers.
type workload struct {
	kind, name, namespace string
	spec                  *corev1.PodSpec
	// longRunning is set when Kubernetes restarts its containers whatever
	// their exit status (a Deployment's, a StatefulSet's).
	longRunning bool
}

func (w workload) String() string { return w.kind + " " + w.name }

// workloads are the objects of the manifests that run Pods.
func workloads(o *objects) []workload {
	var ws []workload
	for _, s := range o.statefulSets {
		ws = append(ws, workload{"StatefulSet", s.Name, s.Namespace, &s.Spec.Template.Spec, true})
	}
	for _, d := range o.deployments {
		ws = append(ws, workload{"Deployment", d.Name, d.Namespace, &d.Spec.Template.Spec, true})
	}
	for _, j := range o.jobs {
		ws = append(ws, workload{"Job", j.Name, j.Namespace, &j.Spec.Template.Spec, false})
	}
	for _, j := range o.cronJobs {
		ws = append(ws, workload{"CronJob", j.Name, j.Namespace, &j.Spec.JobTemplate.Spec.Template.Spec, false})
	}
	return ws
}

// client is a container that runs redlock against the nodes.
type client struct {
	w        workload
	c        corev1.Container
	where    string // for messages
	cmd      command
	set      settings
	nodes    nodeList // --nodes, or else REDLOCK_NODES
	next     nodeList // --next-nodes, or else REDLOCK_NEXT_NODES
	password string   // from --password-file, or else REDLOCK_PASSWORD
}

// nodeList is a list of node URLs and where it came from.
type nodeList struct{ source, value string }

// readClients reads every container that runs redlock or has its
// variables (REDLOCK_*), outside the nodes' Pods: redlock must be its main
// process, so that it gets the SIGTERM of an eviction.
func readClients(o *objects, nd *nodes, r *report) []*client {
	var clients []*client
	for _, w := range workloads(o) {
		if w.spec == nd.podSpec {
			continue
		}
		for _, c := range append(slices.Clone(w.spec.InitContainers), w.spec.Containers...) {
			where := fmt.Sprintf("%s, container %s", w, c.Name)
			vars := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "REDLOCK_") })
			p, err := containerProcess(c, o.images)
			switch {
			case err != nil && vars:
				r.fail("%s: %v", where, err)
			case err != nil:
			case p.name() == "redlock" && w.namespace != nd.ns:
				r.fail("%s: in namespace %q, the nodes in %q: the nodes' Secret is theirs", where, w.namespace, nd.ns)
			case p.name() == "redlock":
				if cl := readClient(w, c, p, where, r); cl != nil {
					clients = append(clients, cl)
				}
			case vars:
				r.fail("%s: command %q: redlock must be the container's main process (exec form), so that it gets the SIGTERM of an eviction", where, p.argv)
			}
		}
	}
	return clients
}

// readClient reads the redlock command line of one container.
func readClient(w workload, c corev1.Container, p process, where string, r *report) *client {
	cl := &client{w: w, c: c, where: where}
	var err error
	if cl.cmd, err = parseRedlock(p.argv); err != nil {
		r.fail("%s: %v", where, err)
		return nil
	}
	if cl.set, err = cl.cmd.settings(); err != nil {
		r.fail("%s: %v", where, err)
		return nil
	}
	cl.nodes = effectiveList(cl.cmd, p, "nodes", "REDLOCK_NODES")
	cl.next = effectiveList(cl.cmd, p, "next-nodes", "REDLOCK_NEXT_NODES")
	if cl.password, err = clientPassword(w, c, cl.cmd, p); err != nil {
		r.fail("%s: %v", where, err)
	}
	if p.envFrom {
		r.fail("%s: envFrom sets variables the test cannot see (REDLOCK_NODES, REDLOCK_PASSWORD…): give them in env", where)
	}
	return cl
}

// effectiveList is a node list as redlock takes it: the flag when it is
// given and not empty, or else the variable.
func effectiveList(c command, p process, flag, variable string) nodeList {
	if v := c.flags[flag]; v != "" {
		return nodeList{"--" + flag, v}
	}
	return nodeList{variable, p.env[variable]}
}

// clientPassword is the password redlock gives nodes whose URL has none:
// the file of --password-file (which must be a Secret's key mounted in
// the container), or else REDLOCK_PASSWORD.
func clientPassword(w workload, c corev1.Container, cmd command, p process) (string, error) {
	file := cmd.flags["password-file"]
	if file == "" {
		return p.env["REDLOCK_PASSWORD"], nil
	}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(w.spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && v.Secret != nil })
		if i < 0 {
			continue
		}
		rel, ok := file, m.SubPath != "" && file == m.MountPath
		if m.SubPath != "" {
			rel = m.SubPath
		} else {
			rel, ok = strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		}
		if key, found := secretKey(w.spec.Volumes[i].Secret, rel); ok && found {
			return secretValue(w.spec.Volumes[i].Secret.SecretName, key), nil
		}
	}
	return "", fmt.Errorf("--password-file %s is not a key of a Secret volume mounted in the container: the test cannot tell which password it holds", file)
}

// secretKey is the key of a Secret volume that its file rel holds.
func secretKey(v *corev1.SecretVolumeSource, rel string) (string, bool) {
	if len(v.Items) == 0 {
		return rel, !strings.Contains(rel, "/")
	}
	for _, it := range v.Items {
		if it.Path == rel {
			return it.Key, true
		}
	}
	return "", false
}

// nodeSet parses a node list against the nodes: it returns the indexes of
// the nodes it names, which must be the Pods' stable DNS names, each once.
func nodeSet(l nodeList, nd *nodes) ([]int, error) {
	switch {
	case strings.TrimSpace(l.value) == "":
		return nil, fmt.Errorf("no nodes: neither --nodes nor REDLOCK_NODES")
	case unknown(l.value) || strings.Contains(l.value, "\x00"):
		return nil, fmt.Errorf("%s %s: from a ConfigMap, Secret or field the test cannot read", l.source, show(l.value))
	}
	var set []int
	for u := range strings.SplitSeq(l.value, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", l.source, err)
		}
		if p.Scheme != "redis" && p.Scheme != "rediss" {
			return nil, fmt.Errorf("%s: %q: a node of the StatefulSet is redis:// or rediss://", l.source, u)
		}
		if _, ok := p.User.Password(); ok {
			return nil, fmt.Errorf("%s: %s holds a password: it would be written in the manifest (use REDLOCK_PASSWORD from the Secret)", l.source, p.Host)
		}
		i := slices.Index(nd.names, p.Host)
		if i < 0 {
			return nil, fmt.Errorf("%s names %s, which is not a node's stable DNS name (want names among %s)", l.source, p.Host, strings.Join(nd.names, ", "))
		}
		if slices.Contains(set, i) {
			return nil, fmt.Errorf("%s names node %s twice", l.source, p.Host)
		}
		set = append(set, i)
	}
	slices.Sort(set)
	return set, nil
}

// setKey names a set of node indexes.
func setKey(set []int) string {
	var s []string
	for _, i := range set {
		s = append(s, strconv.Itoa(i))
	}
	return "{" + strings.Join(s, ",") + "}"
}

// checkNodeLists checks every client's node lists, and that together
// they are a state of the runbook (docs/kubernetes.md, "Scaling the node
// set"): every client on every node, or a move from one set A to another
// B, with clients on A alone, on A and B (REDLOCK_NEXT_NODES) or on B
// alone, never on A alone beside B alone. It returns the sizes of the
// sets in use.
func checkNodeLists(clients []*client, nd *nodes, r *report) []int {
	alone, pairs := map[string]string{}, map[string]string{} // set (or pair) → a client on it
	sizes := map[string]int{}
	for _, cl := range clients {
		cur, err := nodeSet(cl.nodes, nd)
		if err != nil {
			r.fail("%s: %v", cl.where, err)
			continue
		}
		sizes[setKey(cur)] = len(cur)
		if cl.next.value == "" {
			alone[setKey(cur)] = cl.where
			continue
		}
		next, err := nodeSet(cl.next, nd)
		switch {
		case err != nil:
			r.fail("%s: %v", cl.where, err)
		case slices.Equal(cur, next):
			r.fail("%s: %s names the same nodes as %s: not a move", cl.where, cl.next.source, cl.nodes.source)
		default:
			sizes[setKey(next)] = len(next)
			pairs[setKey(cur)+" to "+setKey(next)] = cl.where
		}
	}
	checkMoveState(alone, pairs, nd, r)
	var out []int
	for _, n := range sizes {
		out = append(out, n)
	}
	return out
}

// checkMoveState checks the sets that clients use alone and the moves
// (pairs) they are in.
func checkMoveState(alone, pairs map[string]string, nd *nodes, r *report) {
	all := make([]int, nd.n)
	for i := range all {
		all[i] = i
	}
	switch {
	case len(pairs) > 1:
		r.fail("clients are in different moves %s: one move at a time (docs/reconfiguration.md)", keys(pairs))
	case len(alone) > 1:
		r.fail("clients use different sets of nodes alone %s: a client on one set alone beside one on another can both win; move through REDLOCK_NEXT_NODES (docs/kubernetes.md, \"Scaling the node set\")", keys(alone))
	case len(pairs) == 0:
		for set, where := range alone {
			if set != setKey(all) {
				r.fail("%s: REDLOCK_NODES names the nodes %s of %s: with no move under way (REDLOCK_NEXT_NODES), every client names every node", where, set, setKey(all))
			}
		}
	default:
		for pair := range pairs {
			from, to, _ := strings.Cut(pair, " to ")
			for set, where := range alone {
				if set != from && set != to {
					r.fail("%s: on the nodes %s alone, which are neither set of the move %s", where, set, pair)
				}
			}
		}
	}
}

func keys(m map[string]string) string {
	var list []string
	for k, where := range m {
		list = append(list, k+" ("+where+")")
	}
	slices.Sort(list)
	return strings.Join(list, ", ")
}

// checkClients checks each client's password, its stop on SIGTERM and
// its wait, and that together they agree with the nodes' rollout.
func checkClients(clients []*client, nd *nodes, r *report) {
	doctor, maxTTL := false, defaultMaxTTL
	var first *client
	for _, cl := range clients {
		checkPassword(cl, nd, r)
		if cl.cmd.name == "run" {
			checkStop(cl, r)
			checkWait(cl, r)
		}
		if cl.cmd.name == "doctor" && !cl.w.longRunning {
			doctor = true
		}
		if first == nil {
			first = cl
		} else if cl.set.maxTTL != first.set.maxTTL {
			r.fail("clients disagree on --max-ttl: %v in %s, %v in %s; every client of a deployment uses the same (WithMaxTTL)", first.set.maxTTL, first.where, cl.set.maxTTL, cl.where)
		}
		maxTTL = max(maxTTL, cl.set.maxTTL)
	}
	if len(clients) == 0 {
		r.fail("no client: no container runs redlock with the nodes")
	}
	if !doctor {
		r.fail("no Job runs redlock doctor")
	}
	checkProbeAgrees(clients, nd, maxTTL, r)
}

// checkProbeAgrees: the readiness probe asks what the clients' votes need:
// their max TTL, prefix and guard mode.
func checkProbeAgrees(clients []*client, nd *nodes, maxTTL time.Duration, r *report) {
	p := nd.probe
	if p == nil {
		return
	}
	name := "StatefulSet " + nd.sts.Name + ", the readiness probe"
	ps, _ := p.settings()
	if len(clients) > 0 && ps.maxTTL != maxTTL {
		r.fail("%s: --max-ttl %v is not the clients' max TTL %v: Ready must mean the node votes for them (a longer one also lengthens their recovery)", name, ps.maxTTL, maxTTL)
	}
	prefix := func(c command) string {
		if v, ok := c.flags["prefix"]; ok {
			return v
		}
		return "redlock:"
	}
	for _, cl := range clients {
		if prefix(cl.cmd) != prefix(*p) {
			r.fail("%s: --prefix %q, %s uses %q: it probes another epoch record", name, prefix(*p), cl.where, prefix(cl.cmd))
		}
		if ps.guard == "persistent" && cl.set.guard == "on" {
			r.fail("%s: --restart-guard persistent, %s has it on: Ready while that client still sees the node recovering", name, cl.where)
		}
	}
}

// checkPassword: the client gives the password the nodes want.
func checkPassword(cl *client, nd *nodes, r *report) {
	switch {
	case nd.password == "" && cl.password != "":
		r.fail("%s: gives the password %s to nodes that have none", cl.where, show(cl.password))
	case cl.password != nd.password:
		r.fail("%s: password %q, the nodes' is %s (requirepass): every node refuses it (NOAUTH, exit 77); give REDLOCK_PASSWORD from the nodes' Secret", cl.where, show(cl.password), show(nd.password))
	}
}

// Time from the SIGTERM of an eviction to redlock run's exit, besides
// --grace (docs/kubernetes.md, "An evicted holder"): a second to kill the
// command's group and reap it, two node timeouts (a refresh still under
// way, then the release), and slack for a loaded machine.
const (
	killTime  = time.Second
	stopSlack = 2 * time.Second
)

// checkStop: the Pod's grace period leaves redlock run the time to stop
// its command and release the lock when it is evicted.
func checkStop(cl *client, r *report) {
	spec := cl.w.spec
	tgp := 30 * time.Second
	if spec.TerminationGracePeriodSeconds != nil {
		tgp = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	hook, err := preStop(cl.c)
	if err != nil {
		r.fail("%s: %v", cl.where, err)
		return
	}
	need := hook + cl.set.grace + killTime + 2*nodeTimeout(cl.set.ttl) + stopSlack
	if tgp < need {
		r.fail("%s: terminationGracePeriodSeconds %v leaves no room to stop the command and release the lock: want at least %v (preStop %v + --grace %v + %v to kill and reap + 2 node timeouts of %v + %v of slack; docs/kubernetes.md, \"An evicted holder\")",
			cl.w, tgp, need, hook, cl.set.grace, killTime, nodeTimeout(cl.set.ttl), stopSlack)
	}
}

// preStop is the length of a container's preStop hook, which runs before
// the SIGTERM within the same grace period.
func preStop(c corev1.Container) (time.Duration, error) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0, nil
	}
	if s := c.Lifecycle.PreStop.Sleep; s != nil {
		return time.Duration(s.Seconds) * time.Second, nil
	}
	return 0, errors.New("a preStop hook whose length the test cannot know: give it as a sleep action")
}

// minWait is the shortest --wait of redlock run in a Deployment or a
// StatefulSet: the replica that waits exits 75 when its wait ends, and is
// restarted.
const minWait = 30 * 24 * time.Hour

// checkWait: a waiting replica does not exit 75 into a restart every
// --wait.
func checkWait(cl *client, r *report) {
	if cl.w.longRunning && cl.set.wait < minWait {
		r.fail("%s: redlock run --wait %v: the replica that waits exits 75 when it ends and Kubernetes restarts it (a restart, and CrashLoopBackOff, every %v); wait at least %v (docs/kubernetes.md, \"The replica that waits\")",
			cl.where, cl.set.wait, max(cl.set.wait, time.Second), minWait)
	}
}

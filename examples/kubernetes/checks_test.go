package kubernetes

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// report collects the broken invariants.
type report struct{ errs []error }

func (r *report) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// check returns every broken invariant of the deployment.
func check(o *objects) []error {
	r := &report{}
	nodes, ok := findNodes(o, r)
	if !ok {
		return r.errs
	}
	checkServices(o, nodes, r)
	checkRedis(nodes, r)
	checkPlacement(nodes, r)
	checkProbes(nodes, r)
	clients := readClients(o, nodes, r)
	sets := checkNodeLists(clients, nodes, r)
	checkPDBs(o, nodes, sets, r)
	checkClients(clients, nodes, r)
	checkImages(o, r)
	return r.errs
}

// nodes are the Redis nodes: the one StatefulSet whose Pods run
// redis-server.
type nodes struct {
	sts       *appsv1.StatefulSet
	n, quorum int
	ns        string
	pods      map[string]string // the Pods' labels
	container corev1.Container  // the redis-server container
	proc      process
	conf      redisConfig
	names     []string // each Pod's stable DNS name and port, by index
	podSpec   *corev1.PodSpec
	governing *corev1.Service
	password  string // requirepass ("" if none)
	// probe is the readiness probe's redlock probe, nil when it runs
	// none.
	probe *command
}

// findNodes finds the StatefulSet of Redis nodes and reads its
// redis-server container.
func findNodes(o *objects, r *report) (*nodes, bool) {
	var found []*nodes
	for _, s := range o.statefulSets {
		for _, c := range s.Spec.Template.Spec.Containers {
			p, err := containerProcess(c, o.images)
			if err != nil || p.name() != "redis-server" {
				continue
			}
			found = append(found, &nodes{sts: s, container: c, proc: p})
		}
	}
	if len(found) != 1 {
		r.fail("want one StatefulSet of Redis nodes (one container running redis-server), found %d", len(found))
		return nil, false
	}
	nd := found[0]
	nd.ns, nd.pods, nd.podSpec = nd.sts.Namespace, nd.sts.Spec.Template.Labels, &nd.sts.Spec.Template.Spec
	nd.n = 1
	if nd.sts.Spec.Replicas != nil {
		nd.n = int(*nd.sts.Spec.Replicas)
	}
	nd.quorum = nd.n/2 + 1
	if nd.n < 3 || nd.n%2 == 0 {
		r.fail("StatefulSet %s: %d nodes; want an odd number, at least 3 (an even one tolerates no more failures than one less)", nd.sts.Name, nd.n)
	}
	nd.conf = parseRedisArgs(nd.proc.argv[1:])
	port := nd.conf.value("port")
	if port == "" {
		port = "6379"
	}
	for i := range nd.n {
		host := fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", nd.sts.Name, i, nd.sts.Spec.ServiceName, nd.ns)
		nd.names = append(nd.names, net.JoinHostPort(host, port))
	}
	if !slices.ContainsFunc(nd.container.Ports, func(p corev1.ContainerPort) bool { return strconv.Itoa(int(p.ContainerPort)) == port }) {
		r.fail("StatefulSet %s: redis-server listens on port %s, which the container does not declare", nd.sts.Name, port)
	}
	return nd, true
}

// checkServices: no Service load-balances across the nodes; the
// StatefulSet's governing Service is headless, gives each node its DNS
// name, and only while it is ready.
func checkServices(o *objects, nd *nodes, r *report) {
	for _, s := range o.services {
		if s.Namespace != nd.ns || !selects(s.Spec.Selector, nd.pods) {
			continue
		}
		headless := s.Spec.ClusterIP == corev1.ClusterIPNone
		_, onePod := s.Spec.Selector["statefulset.kubernetes.io/pod-name"]
		if !headless && !onePod {
			r.fail("Service %s load-balances across the %d Redis nodes: make it headless (clusterIP: None) or select one Pod (statefulset.kubernetes.io/pod-name)", s.Name, nd.n)
		}
		if s.Name == nd.sts.Spec.ServiceName && headless {
			nd.governing = s
		}
	}
	switch {
	case nd.governing == nil:
		r.fail("StatefulSet %s: serviceName %q is not a headless Service selecting its Pods: the nodes have no stable DNS names", nd.sts.Name, nd.sts.Spec.ServiceName)
	case nd.governing.Spec.PublishNotReadyAddresses:
		r.fail("Service %s: publishNotReadyAddresses gives a node its DNS name before it is ready (while it loads its AOF); docs/kubernetes.md says a node that is starting is not reached", nd.governing.Name)
	}
}

// checkRedis: each node durable, standalone, never evicting a key, with
// its password from a Secret.
func checkRedis(nd *nodes, r *report) {
	name, rc := "StatefulSet "+nd.sts.Name+": redis-server", nd.conf
	if rc.unread != "" {
		r.fail("%s reads %s, which the test cannot see: give every setting as a flag", name, rc.unread)
	}
	for _, err := range rc.errs {
		r.fail("%s: %v", name, err)
	}
	if v, ok := rc.get("replicaof"); ok && !(len(v) == 2 && strings.EqualFold(v[0], "no") && strings.EqualFold(v[1], "one")) {
		r.fail("%s: replicaof %q makes a node a replica of another: the nodes must be independent", name, show(strings.Join(v, " ")))
	}
	for _, want := range []struct{ flag, def, value string }{
		{"appendonly", "no", "yes"},
		{"appendfsync", "everysec", "always"},
		{"maxmemory-policy", "noeviction", "noeviction"},
	} {
		got := rc.value(want.flag)
		if got == "" {
			got = want.def
		}
		if !strings.EqualFold(got, want.value) {
			r.fail("%s: %s %s, want %s (docs/safety.md, docs/fencing.md)", name, want.flag, got, want.value)
		}
	}
	checkMaxmemory(nd, name, r)
	if v, ok := rc.get("requirepass"); ok && len(v) == 1 {
		nd.password = v[0]
		if _, _, ok := secretOf(v[0]); !ok && v[0] != "" {
			r.fail("%s: requirepass %q is not a Secret's value: the password would be written in the manifest", name, show(v[0]))
		}
	}
	if nd.proc.envFrom {
		r.fail("%s: envFrom sets variables the test cannot see", name)
	}
}

// checkMaxmemory: maxmemory is set, and below the container's memory
// limit, so that a full node refuses writes before it is killed.
func checkMaxmemory(nd *nodes, name string, r *report) {
	v := nd.conf.value("maxmemory")
	b, err := redisBytes(v)
	limit, hasLimit := nd.container.Resources.Limits[corev1.ResourceMemory]
	switch {
	case v == "" || err != nil || b == 0:
		r.fail("%s: no maxmemory: a full node is killed for memory (and restarts into the recovery window) instead of refusing new keys", name)
	case !hasLimit:
		r.fail("%s: maxmemory %s but the container has no memory limit", name, v)
	case b >= limit.Value():
		r.fail("%s: maxmemory %s (%d bytes) is not below the container's memory limit %s", name, v, b, limit.String())
	}
}

// checkPlacement: no two nodes on one machine, and no quorum in one zone.
func checkPlacement(nd *nodes, r *report) {
	spec := nd.podSpec
	if !antiAffine(spec, nd.pods) {
		r.fail("StatefulSet %s: no required Pod anti-affinity on kubernetes.io/hostname over its own Pods: two nodes may share a machine", nd.sts.Name)
	}
	var spread *corev1.TopologySpreadConstraint
	for i, c := range spec.TopologySpreadConstraints {
		if c.TopologyKey == "topology.kubernetes.io/zone" && c.WhenUnsatisfiable == corev1.DoNotSchedule &&
			c.LabelSelector != nil && selects(c.LabelSelector.MatchLabels, nd.pods) {
			spread = &spec.TopologySpreadConstraints[i]
		}
	}
	if spread == nil {
		r.fail("StatefulSet %s: no zone spread (topologySpreadConstraints on topology.kubernetes.io/zone, DoNotSchedule, over its own Pods): one zone may hold a quorum", nd.sts.Name)
		return
	}
	// Where fewer zones than minDomains have machines, every zone takes at
	// most maxSkew nodes; otherwise, with d ≥ minDomains zones, a zone takes
	// at most the M for which M + (d−1)(M − maxSkew) ≤ n.
	skew, domains := int(spread.MaxSkew), 1
	if spread.MinDomains != nil {
		domains = int(*spread.MinDomains)
	}
	most := max(skew, (nd.n+(domains-1)*skew)/domains)
	if most >= nd.quorum {
		r.fail("StatefulSet %s: the zone spread (maxSkew %d, minDomains %d) lets one zone hold %d of the %d nodes, a quorum: set minDomains to 3 (docs/kubernetes.md, zones)", nd.sts.Name, skew, domains, most, nd.n)
	}
}

// checkProbes: ready only while the node votes (redlock probe, checked
// against the clients in checkClients), alive only while redis-server
// answers within a bound.
func checkProbes(nd *nodes, r *report) {
	c, name := nd.container, "StatefulSet "+nd.sts.Name+", container "+nd.container.Name
	if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || len(c.ReadinessProbe.Exec.Command) == 0 || path.Base(c.ReadinessProbe.Exec.Command[0]) != "redlock" {
		r.fail("%s: the readiness probe must run redlock probe on the node, so that Ready means it votes (a PONG is Ready while the restart guard keeps it out): got %q", name, probeScript(c.ReadinessProbe))
	} else {
		nd.probe = checkReadiness(nd, name, c.ReadinessProbe.Exec.Command, r)
	}
	live := probeScript(c.LivenessProbe)
	switch {
	case c.LivenessProbe == nil:
		r.fail("%s: no liveness probe: a frozen redis-server is never restarted", name)
	case c.LivenessProbe.Exec == nil:
		r.fail("%s: the liveness probe is not redis-cli ping: a TCP or HTTP liveness probe passes for a frozen redis-server, whose kernel still accepts connections", name)
	case !strings.Contains(live, "redis-cli") || !strings.Contains(live, "ping"):
		r.fail("%s: the liveness probe does not run redis-cli ping: got %q", name, live)
	default:
		m := timeoutCmd.FindStringSubmatch(live)
		within := max(c.LivenessProbe.TimeoutSeconds, 1)
		if m == nil || atoi(m[1]) >= int(within) {
			r.fail("%s: the liveness probe must bound redis-cli ping with timeout N, N below its timeoutSeconds %d: got %q", name, within, live)
		}
	}
	if nd.password != "" && nd.proc.env["REDISCLI_AUTH"] != nd.password {
		r.fail("%s: redis-server has a password but REDISCLI_AUTH is %q, not the same Secret's: the liveness probe's redis-cli gets NOAUTH and every node is restarted", name, show(nd.proc.env["REDISCLI_AUTH"]))
	}
}

// checkReadiness checks the readiness probe's redlock command line, argv:
// redlock probe of this node alone, authenticated, from a binary that an
// init container of the redlock-cli image puts in a volume of the node's
// container. It returns the command, nil when it is not one.
func checkReadiness(nd *nodes, name string, argv []string, r *report) *command {
	cmd, err := parseRedlock(argv)
	if err == nil {
		_, err = cmd.settings()
	}
	switch {
	case err != nil:
		r.fail("%s: the readiness probe: %v", name, err)
		return nil
	case cmd.name != "probe" || len(cmd.args) > 0:
		r.fail("%s: the readiness probe must run redlock probe, alone: got %q", name, argv)
		return nil
	case cmd.flags["restart-guard"] == "off":
		r.fail("%s: the readiness probe's --restart-guard off: redlock probe refuses it", name)
	}
	port := nd.conf.value("port")
	if port == "" {
		port = "6379"
	}
	u, err := url.Parse(cmd.flags["nodes"])
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || !slices.Contains([]string{"localhost", "127.0.0.1", "::1"}, u.Hostname()) || u.Port() != port {
		r.fail("%s: the readiness probe's --nodes %q: want this node alone, redis://localhost:%s", name, cmd.flags["nodes"], port)
	}
	if nd.password != "" && (u == nil || u.User == nil) && nd.proc.env["REDLOCK_PASSWORD"] != nd.password {
		r.fail("%s: redis-server has a password but the readiness probe's REDLOCK_PASSWORD is %q, not the same Secret's: the probe gets NOAUTH and no node is ever ready", name, show(nd.proc.env["REDLOCK_PASSWORD"]))
	}
	if !probeBinary(nd, argv[0]) {
		r.fail("%s: the readiness probe runs %s, which the redis image lacks: copy the CLI there from the redlock-cli image in an init container, into a volume both mount", name, argv[0])
	}
	return &cmd
}

// probeBinary reports whether bin is in a volume that the node's container
// mounts and an init container of the redlock-cli image mounts too.
func probeBinary(nd *nodes, bin string) bool {
	dir := path.Dir(bin)
	vol := ""
	for _, m := range nd.container.VolumeMounts {
		if path.Clean(m.MountPath) == dir {
			vol = m.Name
		}
	}
	if vol == "" {
		return false
	}
	for _, c := range nd.podSpec.InitContainers {
		if path.Base(imageRepo(c.Image)) != "redlock-cli" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == vol && !m.ReadOnly {
				return true
			}
		}
	}
	return false
}

// timeoutCmd is coreutils' timeout N at the start of a command.
var timeoutCmd = regexp.MustCompile(`\btimeout\s+(\d+)\s`)

// probeScript is an exec probe's command as one string ("" for none).
func probeScript(p *corev1.Probe) string {
	if p == nil || p.Exec == nil {
		return ""
	}
	return strings.Join(p.Exec.Command, " ")
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// checkPDBs: a quorum of every set of nodes that a client uses survives
// voluntary disruptions. sets are the sizes of those sets.
func checkPDBs(o *objects, nd *nodes, sets []int, r *report) {
	budget, of := nd.n-nd.quorum, nd.n
	for _, m := range sets {
		if m-(m/2+1) < budget {
			budget, of = m-(m/2+1), m
		}
	}
	covered := false
	for _, p := range o.pdbs {
		if p.Namespace != nd.ns || p.Spec.Selector == nil || !selects(p.Spec.Selector.MatchLabels, nd.pods) {
			continue
		}
		covered = true
		down, err := disruptable(p.Spec.MaxUnavailable, p.Spec.MinAvailable, nd.n)
		if err != nil {
			r.fail("PodDisruptionBudget %s: %v", p.Name, err)
			continue
		}
		if down > budget {
			r.fail("PodDisruptionBudget %s lets %d of %d nodes be disrupted; a set of %d nodes in use keeps its quorum through at most %d", p.Name, down, nd.n, of, budget)
		}
	}
	if !covered {
		r.fail("no PodDisruptionBudget selects the Redis nodes: a drain may take down more than %d of %d", budget, nd.n)
	}
}

// disruptable is how many of n Pods a PodDisruptionBudget lets go.
func disruptable(maxUnavailable, minAvailable *intstr.IntOrString, n int) (int, error) {
	switch {
	case maxUnavailable != nil:
		return intstr.GetScaledValueFromIntOrPercent(maxUnavailable, n, true)
	case minAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(minAvailable, n, true)
		return n - v, err
	}
	return n, nil
}

// checkImages: every image names a version, not latest: a Pod restarted
// later must run what was deployed.
func checkImages(o *objects, r *report) {
	for _, w := range workloads(o) {
		for _, c := range append(slices.Clone(w.spec.InitContainers), w.spec.Containers...) {
			if tag := imageTag(c.Image); (tag == "" || tag == "latest") && !strings.Contains(c.Image, "@") {
				r.fail("%s, container %s: image %q names no version (or latest): a Pod restarted later runs whatever it is then", w, c.Name, c.Image)
			}
		}
	}
}

// selects reports whether a non-empty selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// antiAffine reports whether the Pods may not share a machine.
func antiAffine(spec *corev1.PodSpec, labels map[string]string) bool {
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == "kubernetes.io/hostname" && term.LabelSelector != nil && selects(term.LabelSelector.MatchLabels, labels) {
			return true
		}
	}
	return false
}

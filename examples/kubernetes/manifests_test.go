// Package kubernetes holds the example manifests of a Redlock deployment on
// Kubernetes (docs/kubernetes.md) and their test: every manifest is decoded
// strictly into the Kubernetes API types (an unknown or misspelled field
// fails), and the deployment's invariants are checked. It is a module of
// its own, so that no user of the library pulls the Kubernetes API
// packages.
package kubernetes

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// objects are the decoded manifests, by kind.
type objects struct {
	namespaces   []*corev1.Namespace
	services     []*corev1.Service
	statefulSets []*appsv1.StatefulSet
	deployments  []*appsv1.Deployment
	jobs         []*batchv1.Job
	pdbs         []*policyv1.PodDisruptionBudget
}

// kinds maps each kind the manifests may hold to its API version and a
// function that decodes a document of it strictly and files it.
var kinds = map[string]struct {
	apiVersion string
	decode     func(o *objects, doc []byte) error
}{
	"Namespace": {"v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.namespaces)
	}},
	"Service": {"v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.services)
	}},
	"StatefulSet": {"apps/v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.statefulSets)
	}},
	"Deployment": {"apps/v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.deployments)
	}},
	"Job": {"batch/v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.jobs)
	}},
	"PodDisruptionBudget": {"policy/v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.pdbs)
	}},
}

// strict decodes doc into a new T, refusing unknown and duplicate fields,
// and appends it to list.
func strict[T any](doc []byte, list *[]*T) error {
	v := new(T)
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode decodes the YAML documents of one file into o.
func decode(o *objects, name string, data []byte) error {
	for i, doc := range docSeparator.Split(string(data), -1) {
		if isEmpty(doc) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return fmt.Errorf("%s, document %d: %v", name, i+1, err)
		}
		k, ok := kinds[tm.Kind]
		if !ok {
			return fmt.Errorf("%s, document %d: kind %q is none the test knows", name, i+1, tm.Kind)
		}
		if tm.APIVersion != k.apiVersion {
			return fmt.Errorf("%s, document %d: %s with apiVersion %q, want %q", name, i+1, tm.Kind, tm.APIVersion, k.apiVersion)
		}
		if err := k.decode(o, []byte(doc)); err != nil {
			return fmt.Errorf("%s, document %d (%s): %v", name, i+1, tm.Kind, err)
		}
	}
	return nil
}

// isEmpty reports whether a YAML document holds only comments and blanks.
func isEmpty(doc string) bool {
	for line := range strings.SplitSeq(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// load decodes every manifest (*.yaml) of the directory.
func load(t *testing.T) *objects {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests (*.yaml) found")
	}
	o := &objects{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := decode(o, f, data); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// TestManifests decodes every manifest strictly and checks the
// deployment's invariants.
func TestManifests(t *testing.T) {
	o := load(t)
	for _, err := range check(o) {
		t.Error(err)
	}
}

// TestStrictDecoding: a misspelled field, a field at the wrong level, a
// kind the test does not know and a wrong apiVersion each fail.
func TestStrictDecoding(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"misspelled field", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replica: 5\n", `unknown field "replica"`},
		{"field at the wrong level", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nmaxUnavailable: 2\n", `unknown field "maxUnavailable"`},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIP: None\n  clusterIP: 10.0.0.1\n", "already set"},
		{"unknown kind", "apiVersion: v1\nkind: Sevrice\nmetadata: {name: x}\n", "none the test knows"},
		{"wrong apiVersion", "apiVersion: apps/v1beta1\nkind: StatefulSet\nmetadata: {name: x}\n", "want \"apps/v1\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decode(&objects{}, "test.yaml", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestChecksCatch breaks one invariant of the example at a time and
// expects check to name it: the checks can fail.
func TestChecksCatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(o *objects)
		want   string
	}{
		{"a ClusterIP Service over the nodes", func(o *objects) {
			s := o.services[0].DeepCopy()
			s.Name, s.Spec.ClusterIP = "redlock-redis-lb", ""
			o.services = append(o.services, s)
		}, "load-balances"},
		{"the headless Service made a ClusterIP one", func(o *objects) {
			o.services[0].Spec.ClusterIP = ""
		}, "load-balances"},
		{"an even node count", func(o *objects) {
			o.statefulSets[0].Spec.Replicas = ptr(int32(4))
		}, "odd"},
		{"a PDB that allows losing the quorum", func(o *objects) {
			v := intstr.FromInt32(3)
			o.pdbs[0].Spec.MaxUnavailable = &v
		}, "quorum"},
		{"a PDB by percentage that allows losing the quorum", func(o *objects) {
			v := intstr.FromString("50%")
			o.pdbs[0].Spec.MaxUnavailable = &v
		}, "quorum"},
		{"no PDB", func(o *objects) { o.pdbs = nil }, "PodDisruptionBudget"},
		{"a node missing from REDLOCK_NODES", func(o *objects) {
			setNodes(o.deployments[0], nodesOf(4))
		}, "REDLOCK_NODES"},
		{"the Service's name in REDLOCK_NODES", func(o *objects) {
			setNodes(o.jobs[0], "redis://redlock-redis.redlock.svc.cluster.local:6379")
		}, "REDLOCK_NODES"},
		{"a node twice in REDLOCK_NODES", func(o *objects) {
			setNodes(o.deployments[0], nodesOf(5)+",redis://redlock-redis-0.redlock-redis.redlock.svc.cluster.local:6379")
		}, "REDLOCK_NODES"},
		{"replication", func(o *objects) {
			c := &o.statefulSets[0].Spec.Template.Spec.Containers[0]
			c.Args = append(c.Args, "--replicaof", "redlock-redis-0.redlock-redis", "6379")
		}, "replica"},
		{"appendfsync everysec", func(o *objects) {
			c := &o.statefulSets[0].Spec.Template.Spec.Containers[0]
			c.Args[slices.Index(c.Args, "--appendfsync")+1] = "everysec"
		}, "appendfsync"},
		{"an eviction policy", func(o *objects) {
			c := &o.statefulSets[0].Spec.Template.Spec.Containers[0]
			c.Args[slices.Index(c.Args, "--maxmemory-policy")+1] = "volatile-lru"
		}, "noeviction"},
		{"no anti-affinity", func(o *objects) {
			o.statefulSets[0].Spec.Template.Spec.Affinity = nil
		}, "anti-affinity"},
		{"a rolling update faster than the restart guard", func(o *objects) {
			o.statefulSets[0].Spec.MinReadySeconds = 10
		}, "minReadySeconds"},
		{"a grace period shorter than --grace", func(o *objects) {
			o.deployments[0].Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(5))
		}, "terminationGracePeriodSeconds"},
		{"redlock run behind a shell", func(o *objects) {
			c := &o.deployments[0].Spec.Template.Spec.Containers[0]
			c.Command = append([]string{"/bin/sh", "-c"}, strings.Join(c.Command, " "))
		}, "main process"},
		{"no doctor Job", func(o *objects) { o.jobs = nil }, "doctor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := load(t)
			c.mutate(o)
			errs := check(o)
			if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), c.want) }) {
				t.Errorf("no error containing %q; got %v", c.want, errs)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// nodesOf is REDLOCK_NODES for the first n nodes of the example.
func nodesOf(n int) string {
	var urls []string
	for i := range n {
		urls = append(urls, fmt.Sprintf("redis://redlock-redis-%d.redlock-redis.redlock.svc.cluster.local:6379", i))
	}
	return strings.Join(urls, ",")
}

// setNodes sets REDLOCK_NODES in the first container of a workload.
func setNodes(w any, v string) {
	spec := podSpec(w)
	for i := range spec.Containers[0].Env {
		if spec.Containers[0].Env[i].Name == "REDLOCK_NODES" {
			spec.Containers[0].Env[i].Value = v
		}
	}
}

func podSpec(w any) *corev1.PodSpec {
	switch w := w.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template.Spec
	case *batchv1.Job:
		return &w.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &w.Spec.Template.Spec
	}
	panic(fmt.Sprintf("no pod spec in %T", w))
}

// defaultMaxTTL is the CLI's and the library's default max TTL
// (WithMaxTTL, --max-ttl).
const defaultMaxTTL = time.Minute

// check returns every broken invariant of the deployment.
func check(o *objects) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// The Redis nodes: the StatefulSets whose Pods run redis-server.
	var nodes []*appsv1.StatefulSet
	for _, s := range o.statefulSets {
		if runsRedis(&s.Spec.Template.Spec) {
			nodes = append(nodes, s)
		}
	}
	if len(nodes) != 1 {
		fail("want one StatefulSet of Redis nodes, found %d", len(nodes))
		return errs
	}
	sts := nodes[0]
	ns, pods := sts.Namespace, sts.Spec.Template.Labels
	n := 1
	if sts.Spec.Replicas != nil {
		n = int(*sts.Spec.Replicas)
	}
	quorum := n/2 + 1
	if n < 3 || n%2 == 0 {
		fail("StatefulSet %s: %d nodes; want an odd number, at least 3 (an even one tolerates no more failures than one less)", sts.Name, n)
	}

	// No Service load-balances across the nodes; the StatefulSet's
	// governing Service is headless and gives each node its DNS name.
	governing := false
	for _, s := range o.services {
		if s.Namespace != ns || !selects(s.Spec.Selector, pods) {
			continue
		}
		headless := s.Spec.ClusterIP == corev1.ClusterIPNone
		_, onePod := s.Spec.Selector["statefulset.kubernetes.io/pod-name"]
		if !headless && !onePod {
			fail("Service %s load-balances across the %d Redis nodes: make it headless (clusterIP: None) or select one Pod (statefulset.kubernetes.io/pod-name)", s.Name, n)
		}
		if s.Name == sts.Spec.ServiceName && headless {
			governing = true
		}
	}
	if !governing {
		fail("StatefulSet %s: serviceName %q is not a headless Service selecting its Pods: the nodes have no stable DNS names", sts.Name, sts.Spec.ServiceName)
	}

	// Each node independent and durable.
	for _, c := range sts.Spec.Template.Spec.Containers {
		args := append(slices.Clone(c.Command), c.Args...)
		if !slices.Contains(args, "redis-server") {
			continue
		}
		for _, a := range args {
			if a = strings.ToLower(strings.TrimLeft(a, "-")); a == "replicaof" || a == "slaveof" {
				fail("StatefulSet %s: %s makes a node a replica of another: the nodes must be independent", sts.Name, a)
			}
		}
		for flag, want := range map[string]string{"--appendonly": "yes", "--appendfsync": "always", "--maxmemory-policy": "noeviction"} {
			if got := flagValue(args, flag); got != want {
				fail("StatefulSet %s: %s %q, want %q (docs/safety.md, docs/fencing.md)", sts.Name, flag, got, want)
			}
		}
	}
	if !antiAffine(&sts.Spec.Template.Spec, pods) {
		fail("StatefulSet %s: no required Pod anti-affinity on kubernetes.io/hostname over its own Pods: two nodes may share a machine", sts.Name)
	}

	// A quorum survives voluntary disruptions.
	covered := false
	for _, p := range o.pdbs {
		if p.Namespace != ns || p.Spec.Selector == nil || !selects(p.Spec.Selector.MatchLabels, pods) {
			continue
		}
		covered = true
		down := n
		switch {
		case p.Spec.MaxUnavailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MaxUnavailable, n, true)
			if err != nil {
				fail("PodDisruptionBudget %s: %v", p.Name, err)
				continue
			}
			down = v
		case p.Spec.MinAvailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MinAvailable, n, true)
			if err != nil {
				fail("PodDisruptionBudget %s: %v", p.Name, err)
				continue
			}
			down = n - v
		}
		if down > n-quorum {
			fail("PodDisruptionBudget %s lets %d of %d nodes be disrupted; a quorum of %d allows at most %d", p.Name, down, n, quorum, n-quorum)
		}
	}
	if !covered {
		fail("no PodDisruptionBudget selects the Redis nodes: a drain may take down more than %d of %d", n-quorum, n)
	}

	// The clients: every REDLOCK_NODES names exactly the nodes' stable
	// DNS names; redlock is each container's main process.
	port := redisPort(&sts.Spec.Template.Spec)
	want := make([]string, n)
	for i := range n {
		want[i] = net.JoinHostPort(fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", sts.Name, i, sts.Spec.ServiceName, ns), port)
	}
	maxTTL := defaultMaxTTL
	var workloads []workload
	for _, d := range o.deployments {
		workloads = append(workloads, workload{"Deployment " + d.Name, d.Namespace, &d.Spec.Template.Spec})
	}
	doctor := false
	for _, j := range o.jobs {
		workloads = append(workloads, workload{"Job " + j.Name, j.Namespace, &j.Spec.Template.Spec})
	}
	clients := 0
	for _, w := range workloads {
		for _, c := range w.spec.Containers {
			v, ok := env(c, "REDLOCK_NODES")
			if !ok {
				continue
			}
			clients++
			if w.namespace != ns {
				fail("%s: in namespace %q, the nodes in %q", w.name, w.namespace, ns)
			}
			if err := sameNodes(v, want); err != nil {
				fail("%s, container %s: REDLOCK_NODES %v", w.name, c.Name, err)
			}
			if len(c.Command) == 0 || filepath.Base(c.Command[0]) != "redlock" {
				fail("%s, container %s: command %q: redlock must be the container's main process (exec form), so that it gets the SIGTERM of an eviction", w.name, c.Name, c.Command)
				continue
			}
			if d, err := durationFlag(c.Command, "--max-ttl", defaultMaxTTL); err != nil {
				fail("%s: %v", w.name, err)
			} else {
				maxTTL = max(maxTTL, d)
			}
			switch sub := c.Command[1]; sub {
			case "doctor":
				doctor = true
			case "run":
				ttl, err1 := durationFlag(c.Command, "--ttl", 30*time.Second)
				grace, err2 := durationFlag(c.Command, "--grace", min(5*time.Second, ttl/2))
				if err := errors.Join(err1, err2); err != nil {
					fail("%s: %v", w.name, err)
					continue
				}
				tgp := 30 * time.Second
				if w.spec.TerminationGracePeriodSeconds != nil {
					tgp = time.Duration(*w.spec.TerminationGracePeriodSeconds) * time.Second
				}
				if tgp <= grace {
					fail("%s: terminationGracePeriodSeconds %v is not above --grace %v: the command's own time to stop on SIGTERM, after which redlock still releases the lock", w.name, tgp, grace)
				}
			}
		}
	}
	if clients == 0 {
		fail("no workload sets REDLOCK_NODES")
	}
	if !doctor {
		fail("no Job runs redlock doctor")
	}
	if time.Duration(sts.Spec.MinReadySeconds)*time.Second <= maxTTL {
		fail("StatefulSet %s: minReadySeconds %d is not above the clients' max TTL %v: a rolling update restarts the next node while the last one still recovers under the restart guard", sts.Name, sts.Spec.MinReadySeconds, maxTTL)
	}
	return errs
}

type workload struct {
	name, namespace string
	spec            *corev1.PodSpec
}

// runsRedis reports whether a Pod runs redis-server.
func runsRedis(spec *corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		if slices.Contains(c.Command, "redis-server") || slices.Contains(c.Args, "redis-server") {
			return true
		}
	}
	return false
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

// flagValue is the value after flag in args ("" if absent).
func flagValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// durationFlag is the duration after flag in a redlock command line, or
// def.
func durationFlag(argv []string, flag string, def time.Duration) (time.Duration, error) {
	v := flagValue(argv, flag)
	for _, a := range argv {
		if after, ok := strings.CutPrefix(a, flag+"="); ok {
			v = after
		}
	}
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %v", flag, v, err)
	}
	return d, nil
}

// redisPort is the port of the container that runs redis-server.
func redisPort(spec *corev1.PodSpec) string {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return "6379"
}

func env(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// sameNodes checks that a node list names exactly the addresses want,
// each once, in any order.
func sameNodes(list string, want []string) error {
	var got []string
	for u := range strings.SplitSeq(list, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			return err
		}
		if p.Scheme != "redis" && p.Scheme != "rediss" {
			return fmt.Errorf("%q: a node URL is redis:// or rediss://", u)
		}
		got = append(got, p.Host)
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			return fmt.Errorf("names %s, which is not a node's stable DNS name (want each of %s once)", g, strings.Join(want, ", "))
		}
	}
	for _, w := range want {
		if c := count(got, w); c != 1 {
			return fmt.Errorf("names node %s %d times, want once", w, c)
		}
	}
	return nil
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

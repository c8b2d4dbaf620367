package kubernetes

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// edit changes a copy of one file of the manifests: old, which must occur
// exactly once, becomes new; an empty old with drop set removes the file;
// an empty old appends new as another document.
type edit struct {
	file, old, new string
	drop           bool
}

func replace(file, old, new string) edit { return edit{file: file, old: old, new: new} }
func insertBefore(file, at, text string) edit {
	return edit{file: file, old: at, new: text + at}
}
func appendDoc(file, doc string) edit { return edit{file: file, new: "---\n" + doc} }
func drop(file string) edit           { return edit{file: file, drop: true} }

// apply applies e to files, or says why it does not apply: a mutation
// that does not apply tests nothing.
func (e edit) apply(files map[string]string) error {
	text, ok := files[e.file]
	switch {
	case !ok:
		return fmt.Errorf("no file %s", e.file)
	case e.drop:
		delete(files, e.file)
	case e.old == "":
		files[e.file] = text + e.new
	case strings.Count(text, e.old) != 1:
		return fmt.Errorf("%s holds %q %d times, want once", e.file, e.old, strings.Count(text, e.old))
	default:
		files[e.file] = strings.Replace(text, e.old, e.new, 1)
	}
	return nil
}

// Lines of the example that the mutations change.
const (
	redisArgsEnd  = "            - --requirepass\n            - $(REDISCLI_AUTH)\n"
	runStart      = "          command:\n            - redlock\n            - run\n"
	runWait       = "            - --wait\n            - 8760h\n"
	appEnv        = "          env:\n            - name: REDLOCK_NODES\n"
	pdbBudget     = "  maxUnavailable: 2\n"
	passwordRef   = "            - name: REDLOCK_PASSWORD\n              valueFrom:\n                secretKeyRef:\n                  name: redlock-redis-auth\n                  key: password\n"
	redisAuthEnv  = "            - name: REDISCLI_AUTH\n              valueFrom:\n                secretKeyRef:\n                  name: redlock-redis-auth\n                  key: password\n"
	livenessExec  = "            exec:\n              command: [\"sh\", \"-c\", \"timeout 3 redis-cli ping | grep -qE '^(PONG|LOADING)'\"]\n"
	livenessProbe = "          livenessProbe:\n" + livenessExec + "            initialDelaySeconds: 10\n            periodSeconds: 10\n            timeoutSeconds: 5\n            failureThreshold: 3\n"
	pdbDoc        = "---\n# 5 nodes, quorum 3: at most 5 - 3 = 2 unavailable at once.\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: redlock-redis\n  namespace: redlock\nspec:\n" + pdbBudget + "  selector:\n    matchLabels:\n      app.kubernetes.io/name: redlock-redis\n"
	// appCommand is app.yaml's whole command, from "command:" to the
	// job's script.
	appCommand    = runStart + "            - --ttl\n            - 30s\n            - --grace\n            - 10s\n            - --max-ttl\n            - 1m\n" + runWait + "            - nightly-report\n            - --\n            - /bin/sh\n            - -c\n            - 'trap \"echo stopping; exit 0\" TERM; while :; do echo working; sleep 5; done'\n"
	zoneSpread    = "      topologySpreadConstraints:\n        - topologyKey: topology.kubernetes.io/zone\n          maxSkew: 1\n          minDomains: 3\n          whenUnsatisfiable: DoNotSchedule\n          labelSelector:\n            matchLabels:\n              app.kubernetes.io/name: redlock-redis\n"
	readinessLine = "          readinessProbe:\n            exec:\n              command: [\"sh\", \"-c\", \"redis-cli ping | grep -qx PONG\"]\n            periodSeconds: 5\n"
)

// nodesOf is a list of the example's first n nodes (or of those given).
func nodesOf(n int, only ...int) string {
	if only == nil {
		for i := range n {
			only = append(only, i)
		}
	}
	var urls []string
	for _, i := range only {
		urls = append(urls, fmt.Sprintf("redis://redlock-redis-%d.redlock-redis.redlock.svc.cluster.local:6379", i))
	}
	return strings.Join(urls, ",")
}

// nodesValue is the REDLOCK_NODES value of app.yaml and doctor-job.yaml.
var nodesValue = "              value: >-\n                " + nodesOf(5) + "\n"

// setNodes sets REDLOCK_NODES in one of the clients' files.
func setNodes(file, list string) edit {
	return replace(file, nodesValue, "              value: "+list+"\n")
}

// addNext adds REDLOCK_NEXT_NODES to one of the clients' files.
func addNext(file, list string) edit {
	return insertBefore(file, "            - name: REDLOCK_PASSWORD\n", "            - name: REDLOCK_NEXT_NODES\n              value: "+list+"\n")
}

// cronJob is a CronJob that runs redlock run with the given nodes.
func cronJob(nodes string) string {
	return `apiVersion: batch/v1
kind: CronJob
metadata:
  name: compaction
  namespace: redlock
spec:
  schedule: "@daily"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: compaction
              image: registry.example.com/redlock-cli:v1.2.3
              args: [run, --ttl, 30s, --max-ttl, 1m, compaction, --, ./compact.sh]
              env:
                - name: REDLOCK_NODES
                  value: ` + nodes + `
` + indent(passwordRef, "    ")
}

// indent puts prefix before each line of text.
func indent(text, prefix string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
	return prefix + strings.Join(lines, prefix) + "\n"
}

// mutation is one edit of the manifests, or several, and an error that
// check must return for it ("" when the edit is valid and check must
// return none).
type mutation struct {
	name  string
	edits []edit
	want  string
}

// mutations are realistic edits of the example, each with what check
// must say about it. The first group is issue 48's list.
var mutations = []mutation{
	// Issue 48, section 2.
	{"a later --appendonly no", []edit{insertBefore("redis-nodes.yaml", "          ports:\n", "            - --appendonly\n            - \"no\"\n")}, "appendonly no, want yes"},
	{"a later --maxmemory-policy allkeys-lru", []edit{insertBefore("redis-nodes.yaml", "          ports:\n", "            - --maxmemory-policy\n            - allkeys-lru\n")}, "maxmemory-policy allkeys-lru, want noeviction"},
	{"--replicaof host port as one argument", []edit{insertBefore("redis-nodes.yaml", "          ports:\n", "            - \"--replicaof redlock-redis-0.redlock-redis 6379\"\n")}, "makes a node a replica"},
	{"a client naming the Service through --nodes", []edit{insertBefore("app.yaml", runWait, "            - --nodes\n            - redis://redlock-redis.redlock.svc.cluster.local:6379\n")}, "--nodes names redlock-redis.redlock.svc.cluster.local:6379"},
	{"command [redlock] with args [run, …]", []edit{replace("app.yaml", runStart, "          command:\n            - redlock\n          args:\n            - run\n")}, ""},
	{"command [redlock] with args [run, …] whose --max-ttl outlasts minReadySeconds", []edit{
		replace("app.yaml", runStart, "          command:\n            - redlock\n          args:\n            - run\n"),
		replace("app.yaml", "            - --max-ttl\n            - 1m\n", "            - --max-ttl\n            - 2m\n"),
	}, "minReadySeconds 75 is not above the clients' max TTL 2m0s"},
	{"command [redlock] alone", []edit{replace("app.yaml", appCommand, "          command: [redlock]\n")}, "redlock without a command"},
	{"command [redlock] with args [run] alone", []edit{replace("app.yaml", appCommand, "          command: [redlock]\n          args: [run]\n")}, "redlock run: no lock NAME and COMMAND"},
	{"command [redlock] with args [run, NAME] and no COMMAND", []edit{replace("app.yaml", appCommand, "          command: [redlock]\n          args: [run, --wait=8760h, nightly-report, --]\n")}, "redlock run: no COMMAND after the lock name"},
	{"command [redlock] with args [run, --, …] (no NAME)", []edit{replace("app.yaml", appCommand, "          command: [redlock]\n          args: [run, --wait=8760h, --, ./report.sh]\n")}, `no lock NAME before "--"`},
	{"the zone spread removed", []edit{replace("redis-nodes.yaml", zoneSpread, "")}, "no zone spread"},
	{"the zone spread made a preference", []edit{replace("redis-nodes.yaml", "          whenUnsatisfiable: DoNotSchedule\n", "          whenUnsatisfiable: ScheduleAnyway\n")}, "no zone spread"},
	{"the readiness probe removed", []edit{replace("redis-nodes.yaml", readinessLine, "")}, "readiness probe must want PONG"},
	{"publishNotReadyAddresses: true", []edit{replace("redis-nodes.yaml", "  publishNotReadyAddresses: false\n", "  publishNotReadyAddresses: true\n")}, "publishNotReadyAddresses"},
	{"a grace period with no room for the release round", []edit{replace("app.yaml", "      terminationGracePeriodSeconds: 20\n", "      terminationGracePeriodSeconds: 11\n")}, "terminationGracePeriodSeconds 11s leaves no room"},
	{"--maxmemory removed", []edit{replace("redis-nodes.yaml", "            - --maxmemory\n            - 200mb\n", "")}, "no maxmemory"},
	{"REDLOCK_NEXT_NODES naming the Service", []edit{addNext("app.yaml", "redis://redlock-redis.redlock.svc.cluster.local:6379")}, "REDLOCK_NEXT_NODES names redlock-redis.redlock.svc.cluster.local:6379"},
	{"a CronJob client", []edit{appendDoc("app.yaml", cronJob(nodesOf(5)))}, ""},
	{"a CronJob client naming a Pod IP", []edit{appendDoc("app.yaml", cronJob("redis://10.0.3.7:6379"))}, "CronJob compaction, container compaction: REDLOCK_NODES names 10.0.3.7:6379"},

	// The invariants of the first manifest test (issue 44).
	{"a ClusterIP Service over the nodes", []edit{appendDoc("redis-nodes.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: redlock-redis-lb, namespace: redlock}\nspec:\n  selector: {app.kubernetes.io/name: redlock-redis}\n  ports: [{port: 6379}]\n")}, "Service redlock-redis-lb load-balances"},
	{"the headless Service made a ClusterIP one", []edit{replace("redis-nodes.yaml", "  clusterIP: None\n", "")}, "load-balances"},
	{"an even node count", []edit{replace("redis-nodes.yaml", "  replicas: 5\n", "  replicas: 4\n")}, "want an odd number"},
	{"a PDB that allows losing the quorum", []edit{replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 3\n")}, "lets 3 of 5 nodes be disrupted"},
	{"a PDB by percentage that allows losing the quorum", []edit{replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 50%\n")}, "lets 3 of 5 nodes be disrupted"},
	{"no PDB", []edit{replace("redis-nodes.yaml", pdbDoc, "")}, "no PodDisruptionBudget selects the Redis nodes"},
	{"a node missing from every client's REDLOCK_NODES", []edit{setNodes("app.yaml", nodesOf(4)), setNodes("doctor-job.yaml", nodesOf(4))}, "REDLOCK_NODES names the nodes {0,1,2,3} of {0,1,2,3,4}"},
	{"a node missing from one client's REDLOCK_NODES", []edit{setNodes("app.yaml", nodesOf(4))}, "clients use different sets of nodes alone"},
	{"the Service's name in REDLOCK_NODES", []edit{setNodes("doctor-job.yaml", "redis://redlock-redis.redlock.svc.cluster.local:6379")}, "REDLOCK_NODES names redlock-redis.redlock.svc.cluster.local:6379"},
	{"a node twice in REDLOCK_NODES", []edit{setNodes("app.yaml", nodesOf(5)+","+nodesOf(1))}, "twice"},
	{"replication", []edit{insertBefore("redis-nodes.yaml", "          ports:\n", "            - --replicaof\n            - redlock-redis-0.redlock-redis\n            - \"6379\"\n")}, "makes a node a replica"},
	{"appendfsync everysec", []edit{replace("redis-nodes.yaml", "            - --appendfsync\n            - always\n", "            - --appendfsync\n            - everysec\n")}, "appendfsync everysec, want always"},
	{"an eviction policy", []edit{replace("redis-nodes.yaml", "            - noeviction\n", "            - volatile-lru\n")}, "maxmemory-policy volatile-lru, want noeviction"},
	{"no anti-affinity", []edit{replace("redis-nodes.yaml", "            - topologyKey: kubernetes.io/hostname\n", "            - topologyKey: kubernetes.io/os\n")}, "anti-affinity"},
	{"a rolling update faster than the restart guard", []edit{replace("redis-nodes.yaml", "  minReadySeconds: 75\n", "  minReadySeconds: 10\n")}, "minReadySeconds 10"},
	{"a grace period shorter than --grace", []edit{replace("app.yaml", "      terminationGracePeriodSeconds: 20\n", "      terminationGracePeriodSeconds: 5\n")}, "terminationGracePeriodSeconds 5s"},
	{"redlock run behind a shell", []edit{replace("app.yaml", runStart, "          command:\n            - /bin/sh\n            - -c\n            - redlock run nightly-report -- ./report.sh\n          args:\n            - run\n")}, "main process"},
	{"no doctor Job", []edit{drop("doctor-job.yaml")}, "no Job runs redlock doctor"},

	// Issue 48's K3, K4, K7, K8, K9.
	{"the probes without REDISCLI_AUTH, the password from the Secret", []edit{
		replace("redis-nodes.yaml", redisAuthEnv, "            - name: REDIS_PASSWORD\n              valueFrom:\n                secretKeyRef:\n                  name: redlock-redis-auth\n                  key: password\n"),
		replace("redis-nodes.yaml", redisArgsEnd, "            - --requirepass\n            - $(REDIS_PASSWORD)\n"),
	}, "NOAUTH and no node is ever ready"},
	{"the password written in the manifest", []edit{replace("redis-nodes.yaml", redisArgsEnd, "            - --requirepass\n            - hunter2\n")}, "requirepass \"hunter2\" is not a Secret's value"},
	{"a client without REDLOCK_PASSWORD", []edit{replace("app.yaml", passwordRef, "")}, "every node refuses it (NOAUTH"},
	{"a client with another Secret's password", []edit{replace("doctor-job.yaml", "                  name: redlock-redis-auth\n", "                  name: redlock-doctor\n")}, "every node refuses it (NOAUTH"},
	{"a client's password from a mounted Secret (--password-file)", []edit{
		replace("app.yaml", passwordRef, ""),
		insertBefore("app.yaml", runWait, "            - --password-file\n            - /etc/redlock/password\n"),
		replace("app.yaml", appEnv, "          volumeMounts:\n            - {name: auth, mountPath: /etc/redlock, readOnly: true}\n"+appEnv),
		replace("app.yaml", "      containers:\n", "      volumes:\n        - {name: auth, secret: {secretName: redlock-redis-auth}}\n      containers:\n"),
	}, ""},
	{"a client's --password-file that is no Secret's", []edit{insertBefore("app.yaml", runWait, "            - --password-file\n            - /etc/redlock/password\n")}, "--password-file /etc/redlock/password is not a key of a Secret volume"},
	{"a password in a node URL", []edit{setNodes("doctor-job.yaml", strings.ReplaceAll(nodesOf(5), "redis://", "redis://:hunter2@"))}, "holds a password"},
	{"a zone spread without minDomains", []edit{replace("redis-nodes.yaml", "          minDomains: 3\n", "")}, "lets one zone hold 5 of the 5 nodes"},
	{"a zone spread with minDomains 2", []edit{replace("redis-nodes.yaml", "          minDomains: 3\n", "          minDomains: 2\n")}, "lets one zone hold 3 of the 5 nodes"},
	{"the image at latest", []edit{replace("app.yaml", "          image: redlock-cli:VERSION\n", "          image: redlock-cli:latest\n")}, `image "redlock-cli:latest" names no version`},
	{"the image without a tag", []edit{replace("doctor-job.yaml", "          image: redlock-cli:VERSION\n", "          image: registry.example.com:5000/redlock-cli\n")}, "names no version"},
	{"the waiting replica gives up every hour", []edit{replace("app.yaml", runWait, "            - --wait\n            - 1h\n")}, "--wait 1h0m0s: the replica that waits exits 75"},
	{"the waiting replica tries once", []edit{replace("app.yaml", runWait, "")}, "--wait 0s: the replica that waits exits 75"},
	{"a TCP liveness probe", []edit{replace("redis-nodes.yaml", livenessExec, "            tcpSocket:\n              port: redis\n")}, "passes for a frozen redis-server"},
	{"a liveness probe without timeout", []edit{replace("redis-nodes.yaml", livenessExec, strings.Replace(livenessExec, "timeout 3 ", "", 1))}, "bound redis-cli ping with timeout N"},
	{"a liveness probe whose timeout outlasts timeoutSeconds", []edit{replace("redis-nodes.yaml", "            timeoutSeconds: 5\n", "            timeoutSeconds: 3\n")}, "bound redis-cli ping with timeout N"},
	{"no liveness probe", []edit{replace("redis-nodes.yaml", livenessProbe, "")}, "no liveness probe"},

	// Reading the effective configuration.
	{"redis-server's args without redis-server (the entrypoint adds it)", []edit{replace("redis-nodes.yaml", "            - redis-server\n", "")}, ""},
	{"redis-server as the command", []edit{replace("redis-nodes.yaml", "          args:\n            - redis-server\n", "          command:\n            - redis-server\n          args:\n")}, ""},
	{"a $(VAR) that sets appendfsync", []edit{
		replace("redis-nodes.yaml", "            - --appendfsync\n            - always\n", "            - --appendfsync\n            - $(FSYNC)\n"),
		insertBefore("redis-nodes.yaml", redisAuthEnv, "            - name: FSYNC\n              value: everysec\n"),
	}, "appendfsync everysec, want always"},
	{"\"--appendonly no\" as one argument", []edit{insertBefore("redis-nodes.yaml", "          ports:\n", "            - \"--appendonly no\"\n")}, "appendonly no, want yes"},
	{"a --maxmemory that takes the next flag as its value", []edit{replace("redis-nodes.yaml", "            - --maxmemory\n            - 200mb\n", "            - --maxmemory\n")}, "wrong number of arguments"},
	{"a config file", []edit{replace("redis-nodes.yaml", "            - redis-server\n", "            - redis-server\n            - /etc/redis/redis.conf\n")}, "the config file /etc/redis/redis.conf, which the test cannot see"},
	{"maxmemory above the memory limit", []edit{replace("redis-nodes.yaml", "            - 200mb\n", "            - 300mb\n")}, "is not below the container's memory limit"},
	{"run's args without command (the image's ENTRYPOINT)", []edit{replace("app.yaml", runStart, "          args:\n            - run\n")}, ""},
	{"an image whose entrypoint the test does not know", []edit{replace("app.yaml", "          image: redlock-cli:VERSION\n"+
		"          imagePullPolicy: IfNotPresent\n          # Exec form: redlock is the container's main process (PID 1) and\n          # gets the SIGTERM itself; a shell in between would not pass it on.\n"+runStart,
		"          image: example/report:v2\n          args:\n            - run\n")}, `image "example/report:v2" has an entrypoint the test does not know`},
	{"the Dockerfile's ENTRYPOINT in shell form", []edit{replace("Dockerfile", `ENTRYPOINT ["redlock"]`, "ENTRYPOINT redlock")}, "not in exec form"},
	{"--max-ttl given twice, the last one longer", []edit{insertBefore("app.yaml", runWait, "            - --max-ttl=2m\n")}, "minReadySeconds 75 is not above the clients' max TTL 2m0s"},
	{"clients that disagree on --max-ttl", []edit{replace("doctor-job.yaml", "            - --max-ttl\n            - 1m\n", "            - --max-ttl\n            - 70s\n")}, "clients disagree on --max-ttl"},
	{"a flag after the lock name (run reads it)", []edit{replace("app.yaml", "            - nightly-report\n            - --\n", "            - nightly-report\n            - --ttl=20s\n            - --\n")}, ""},
	{"a longer --max-ttl after the lock name", []edit{replace("app.yaml", "            - nightly-report\n            - --\n", "            - nightly-report\n            - --max-ttl=2m\n            - --\n")}, "minReadySeconds 75 is not above the clients' max TTL 2m0s"},
	{"an unknown flag", []edit{insertBefore("app.yaml", runWait, "            - --wiat=1h\n")}, "unknown flag --wiat=1h"},
	{"a preStop hook the test cannot bound", []edit{insertBefore("app.yaml", appEnv, "          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"5\"]\n")}, "preStop hook whose length"},
	{"a preStop sleep that eats the grace period", []edit{insertBefore("app.yaml", appEnv, "          lifecycle:\n            preStop:\n              sleep:\n                seconds: 6\n")}, "want at least 21s (preStop 6s"},

	// A move to another set of nodes (docs/kubernetes.md, "Scaling the
	// node set"): 5 → 3.
	{"a move 5 → 3, step 1", []edit{addNext("app.yaml", nodesOf(3)), addNext("doctor-job.yaml", nodesOf(3)), replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 1\n")}, ""},
	{"a move 5 → 3, step 1, app first (rollout)", []edit{addNext("app.yaml", nodesOf(3)), replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 1\n")}, ""},
	{"a move 5 → 3 without lowering the PDB", []edit{addNext("app.yaml", nodesOf(3)), addNext("doctor-job.yaml", nodesOf(3))}, "a set of 3 nodes in use keeps its quorum through at most 1"},
	{"a move 5 → 3, step 3 with the doctor still joint", []edit{setNodes("app.yaml", nodesOf(3)), addNext("doctor-job.yaml", nodesOf(3)), replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 1\n")}, ""},
	{"the next set alone beside the current set alone", []edit{setNodes("app.yaml", nodesOf(3)), replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 1\n")}, "clients use different sets of nodes alone"},
	{"two moves at once", []edit{addNext("app.yaml", nodesOf(3)), addNext("doctor-job.yaml", nodesOf(5, 0, 1, 3)), replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 1\n")}, "clients are in different moves"},
	{"REDLOCK_NEXT_NODES the same as REDLOCK_NODES", []edit{addNext("app.yaml", nodesOf(5))}, "names the same nodes as REDLOCK_NODES: not a move"},
	{"REDLOCK_NEXT_NODES naming a Pod that does not exist", []edit{addNext("app.yaml", nodesOf(7))}, "REDLOCK_NEXT_NODES names redlock-redis-5"},
	{"--next-nodes over REDLOCK_NEXT_NODES", []edit{addNext("app.yaml", nodesOf(3)), addNext("doctor-job.yaml", nodesOf(3)), replace("redis-nodes.yaml", pdbBudget, "  maxUnavailable: 1\n"),
		insertBefore("app.yaml", runWait, "            - --next-nodes="+nodesOf(4)+"\n")}, "clients are in different moves"},
}

// TestMutations applies each mutation to a copy of the manifests: check
// must return the error the mutation wants, or none for a valid edit.
func TestMutations(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range mutations {
		if seen[m.name] {
			t.Fatalf("two mutations named %q", m.name)
		}
		seen[m.name] = true
		t.Run(m.name, func(t *testing.T) {
			files := readFiles(t)
			for _, e := range m.edits {
				if err := e.apply(files); err != nil {
					t.Fatalf("the edit does not apply, so it tests nothing: %v", err)
				}
			}
			var errs []error
			o, err := parse(files)
			if err != nil {
				errs = []error{err}
			} else {
				errs = check(o)
			}
			switch {
			case m.want == "" && len(errs) > 0:
				t.Errorf("a valid edit fails: %v", errs)
			case m.want != "" && !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), m.want) }):
				t.Errorf("no error containing %q; got %v", m.want, errs)
			}
		})
	}
}

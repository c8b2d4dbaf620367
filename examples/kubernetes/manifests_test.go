// Package kubernetes holds the example manifests of a Redlock deployment on
// Kubernetes (docs/kubernetes.md) and their test. Every manifest is decoded
// strictly into the Kubernetes API types (an unknown or misspelled field
// fails); then each container is read as Kubernetes runs it (its effective
// command line: the image's entrypoint, command and args, $(VAR) expanded,
// and its environment), redis-server's arguments as redis-server reads
// them (the last of a repeated flag wins), redlock's flags as redlock
// reads them (a flag before its variable), and the deployment's invariants
// are checked on that. TestMutations applies realistic bad edits to a copy
// of the manifests and expects each to fail; the files beside this one
// check the readings against a real redis-server and the real CLI. It is a
// module of its own, so that no user of the library pulls the Kubernetes
// API packages.
package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// objects are the decoded manifests, by kind, and the images they may run.
type objects struct {
	namespaces   []*corev1.Namespace
	services     []*corev1.Service
	statefulSets []*appsv1.StatefulSet
	deployments  []*appsv1.Deployment
	jobs         []*batchv1.Job
	cronJobs     []*batchv1.CronJob
	pdbs         []*policyv1.PodDisruptionBudget
	images       images
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
	"CronJob": {"batch/v1", func(o *objects, doc []byte) error {
		return strict(doc, &o.cronJobs)
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

// dockerfile is the Dockerfile of the image the clients run, beside the
// manifests.
const dockerfile = "Dockerfile"

// readFiles reads the manifests (*.yaml) and the Dockerfile of the
// directory, by name.
func readFiles(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no manifests (*.yaml) found")
	}
	files := map[string]string{}
	for _, name := range append(names, dockerfile) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(data)
	}
	return files
}

// parse decodes the manifests among files and reads the Dockerfile's
// image.
func parse(files map[string]string) (*objects, error) {
	o := &objects{}
	df, ok := files[dockerfile]
	if !ok {
		return nil, fmt.Errorf("no %s", dockerfile)
	}
	img, err := parseDockerfile(df)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dockerfile, err)
	}
	o.images = images{ours: img}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := decode(o, name, []byte(files[name])); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// load decodes the directory's manifests.
func load(t *testing.T) *objects {
	t.Helper()
	o, err := parse(readFiles(t))
	if err != nil {
		t.Fatal(err)
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
		{"a CronJob's misspelled field", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  shedule: '@daily'\n", `unknown field "shedule"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decode(&objects{}, "test.yaml", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

package kubernetes

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// image is what a container image runs when the Pod does not say: its
// ENTRYPOINT and CMD, and what its entrypoint execs (nil: the entrypoint
// is the main process).
type image struct {
	entrypoint, cmd []string
	exec            func(argv []string) []string
}

// images are the images whose entrypoints the test knows: ours (built by
// the Dockerfile beside the manifests, as redlock-cli in any registry, at
// any tag) and the official redis image.
type images struct{ ours image }

// redisImage is the official redis image: docker-entrypoint.sh, which
// puts redis-server before a first argument that is a flag or a .conf
// file, gives redis-server --protected-mode no before the other flags
// (after a config file, unless the file sets protected-mode), and execs
// its arguments (as the user redis, through gosu).
var redisImage = image{
	entrypoint: []string{"docker-entrypoint.sh"},
	cmd:        []string{"redis-server"},
	exec: func(argv []string) []string {
		if len(argv) == 0 || argv[0] != "docker-entrypoint.sh" {
			return argv
		}
		argv = argv[1:]
		if len(argv) > 0 && (strings.HasPrefix(argv[0], "-") || strings.HasSuffix(argv[0], ".conf")) {
			argv = append([]string{"redis-server"}, argv...)
		}
		if len(argv) == 0 || argv[0] != "redis-server" {
			return argv
		}
		at := 1
		if len(argv) > 1 && !strings.HasPrefix(argv[1], "-") {
			at = 2 // a config file: what it sets, the test cannot see anyway
		}
		return slices.Concat(argv[:at], []string{"--protected-mode", "no"}, argv[at:])
	},
}

// lookup is the image named by a container's image reference.
func (im images) lookup(ref string) (image, bool) {
	switch repo := imageRepo(ref); {
	case path.Base(repo) == "redlock-cli":
		return im.ours, true
	case repo == "redis" || repo == "library/redis" || repo == "docker.io/library/redis":
		return redisImage, true
	}
	return image{}, false
}

// imageRepo is an image reference without its tag and digest.
func imageRepo(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// imageTag is an image reference's tag ("" when it has none).
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

// parseDockerfile reads the ENTRYPOINT and CMD of a Dockerfile's last
// stage, which must give them in exec (JSON) form: in shell form, a shell
// would be the main process.
func parseDockerfile(text string) (image, error) {
	var img image
	stage, set := 0, map[string]bool{}
	for _, line := range dockerfileLines(text) {
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			stage++
			img, set = image{}, map[string]bool{}
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				return image{}, fmt.Errorf("%s %s: not in exec form (a JSON array): a shell would be the main process", instr, rest)
			}
			if strings.EqualFold(instr, "ENTRYPOINT") {
				img.entrypoint = argv
				if !set["CMD"] {
					img.cmd = nil // a base image's CMD is reset by ENTRYPOINT
				}
			} else {
				img.cmd = argv
			}
			set[strings.ToUpper(instr)] = true
		}
	}
	if stage == 0 {
		return image{}, errors.New("no FROM")
	}
	if !set["ENTRYPOINT"] {
		return image{}, errors.New("the last stage has no ENTRYPOINT: its base image's would run")
	}
	return img, nil
}

// dockerfileLines are a Dockerfile's instructions, one a line: comments
// dropped, continued lines joined.
func dockerfileLines(text string) []string {
	var lines []string
	cur := ""
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || (t == "" && cur == "") {
			continue
		}
		if more, ok := strings.CutSuffix(t, `\`); ok {
			cur += more + " "
			continue
		}
		lines = append(lines, strings.TrimSpace(cur+t))
		cur = ""
	}
	if cur != "" {
		lines = append(lines, strings.TrimSpace(cur))
	}
	return lines
}

// Values of the environment that the manifests do not hold: a Secret's
// key is known by its reference alone, and what comes from elsewhere (a
// ConfigMap, a field of the Pod) not at all. Each is a string that no
// manifest can write (it holds NUL bytes), so that it survives $(VAR)
// expansion and compares equal only to the same reference.
func secretValue(name, key string) string { return "\x00secret " + name + "/" + key + "\x00" }

func unknownValue(name string) string { return "\x00unknown " + name + "\x00" }

// secretOf reports the Secret and key that v is exactly.
func secretOf(v string) (name, key string, ok bool) {
	ref, ok := strings.CutPrefix(v, "\x00secret ")
	if !ok || !strings.HasSuffix(ref, "\x00") || strings.Count(v, "\x00") != 2 {
		return "", "", false
	}
	name, key, ok = strings.Cut(strings.TrimSuffix(ref, "\x00"), "/")
	return name, key, ok
}

// unknown reports whether v holds a value the test cannot know.
func unknown(v string) bool { return strings.Contains(v, "\x00unknown ") }

// show is v for a message: the references as they are written.
func show(v string) string {
	v = strings.ReplaceAll(v, "\x00secret ", "<Secret ")
	v = strings.ReplaceAll(v, "\x00unknown ", "<unknown ")
	return strings.ReplaceAll(v, "\x00", ">")
}

// process is a container's main process as Kubernetes starts it.
type process struct {
	argv []string          // its command line, $(VAR) expanded
	env  map[string]string // its environment, as far as the manifest gives it
	// envFrom is set when variables come from a whole ConfigMap or
	// Secret (envFrom), which the test cannot see.
	envFrom bool
}

// name is the main process's program ("" when there is none).
func (p process) name() string {
	if len(p.argv) == 0 {
		return ""
	}
	return filepath.Base(p.argv[0])
}

// containerProcess is what a container runs: its command, or else the
// image's entrypoint, then its args, or else (without command) the image's
// CMD; $(VAR) expanded from its environment; and what the image's
// entrypoint execs. It fails for an image whose entrypoint the test does
// not know, when the container gives no command.
func containerProcess(c corev1.Container, im images) (process, error) {
	p := process{env: environment(c), envFrom: len(c.EnvFrom) > 0}
	command, args := expandAll(c.Command, p.env), expandAll(c.Args, p.env)
	img, known := im.lookup(c.Image)
	switch {
	case len(command) > 0:
		p.argv = append(command, args...)
	case !known:
		return p, fmt.Errorf("container %s: image %q has an entrypoint the test does not know: give command", c.Name, c.Image)
	case len(args) > 0:
		p.argv = append(append([]string(nil), img.entrypoint...), args...)
	default:
		p.argv = append(append([]string(nil), img.entrypoint...), img.cmd...)
	}
	if known && img.exec != nil {
		p.argv = img.exec(p.argv)
	}
	if len(p.argv) == 0 {
		return p, fmt.Errorf("container %s runs nothing: no command, args or entrypoint", c.Name)
	}
	return p, nil
}

// environment is a container's variables from its env list, in order,
// each value expanded with those before it, as Kubernetes does.
func environment(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch s := e.ValueFrom; {
		case s == nil:
			env[e.Name] = expand(e.Value, env)
		case s.SecretKeyRef != nil:
			env[e.Name] = secretValue(s.SecretKeyRef.Name, s.SecretKeyRef.Key)
		default:
			env[e.Name] = unknownValue(e.Name)
		}
	}
	return env
}

func expandAll(list []string, env map[string]string) []string {
	var out []string
	for _, s := range list {
		out = append(out, expand(s, env))
	}
	return out
}

// expand replaces each $(NAME) of s by the variable's value, as Kubernetes
// expands command, args and env values: $$ is a $, and a reference to a
// variable that is not defined is left as it is.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := env[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte('$')
	}
	return b.String()
}

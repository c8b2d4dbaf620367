package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// libraryPath is the library's module path, whose version the CLI was
// built with.
const libraryPath = "github.com/redlock-go/redlock"

// version is the version a build stamps with -ldflags "-X
// main.version=VERSION" (the Kubernetes example's Dockerfile does, since a
// build from a filtered context records no module version or commit);
// empty: the build info's module version.
var version string

// printVersion prints what the build info says of this binary: the CLI's
// version (the stamped one, else its module version: a tag, a
// pseudo-version, or "(devel)" for a build from a checkout), the commit
// and its time when the build recorded them, the library's version, and
// the Go release and platform.
func printVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintf(w, "redlock %s (no build information) %s %s/%s\n", orDevel(version), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	v := version
	if v == "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(w, "redlock %s\n", orDevel(v))
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		line := "commit " + rev
		if t := settings["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
		if settings["vcs.modified"] == "true" {
			line += ", with uncommitted changes"
		}
		fmt.Fprintln(w, line)
	}
	for _, d := range bi.Deps {
		if d.Path != libraryPath {
			continue
		}
		line := "library " + orDevel(d.Version)
		if d.Replace != nil {
			line += " replaced by " + strings.TrimSpace(d.Replace.Path+" "+d.Replace.Version)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "built with %s for %s/%s\n", bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}

func orDevel(v string) string {
	if v == "" {
		return "(devel)"
	}
	return v
}

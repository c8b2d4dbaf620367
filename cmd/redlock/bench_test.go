package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

func TestBenchEmbedded(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "latency.svg")
	t.Setenv(envNodes, "")
	r := runCLI(t, "bench", "--embedded", "3", "--duration", "300ms", "--parallel", "4", "--svg", svg)
	if r.code != exitOK {
		t.Fatalf("bench: %v", r)
	}
	if !strings.Contains(r.stdout, "3 embedded redis-server nodes") {
		t.Errorf("does not say which nodes: %v", r)
	}
	for _, sc := range []string{"uncontended", "parallel", "contended"} {
		if !strings.Contains(r.stdout, sc) {
			t.Errorf("no %s row: %v", sc, r)
		}
	}
	if strings.Contains(r.stdout, "\r") {
		t.Error("progress bar drawn on a non-terminal")
	}
	if r.stderr != "" {
		t.Errorf("errors: %s", r.stderr)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkSVG(t, b); n != 3 {
		t.Errorf("%d lines in the chart, want 3", n)
	}
}

func TestBenchGivenNodes(t *testing.T) {
	servers := redistest.Start(t, 3)
	r := runCLI(t, "bench", noGuard, "--nodes", nodesFlag(servers...), "--scenarios", "contended", "--parallel", "3", "--duration", "200ms")
	if r.code != exitOK || !strings.Contains(r.stdout, "3 nodes from --nodes") || !strings.Contains(r.stdout, "contended") {
		t.Errorf("bench: %v", r)
	}
}

// checkSVG parses an SVG document and returns how many polylines it has.
func checkSVG(t *testing.T, b []byte) int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	lines := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return lines
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
}

func TestLatencySVG(t *testing.T) {
	var b bytes.Buffer
	series := []latencySeries{
		{name: "a <&> b", sorted: []time.Duration{time.Microsecond, 2 * time.Millisecond}},
		{name: "one", sorted: []time.Duration{3 * time.Second}},
		{name: "empty"},
	}
	if err := writeLatencySVG(&b, `t "1" & 2`, series); err != nil {
		t.Fatal(err)
	}
	if n := checkSVG(t, b.Bytes()); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	b.Reset()
	if err := writeLatencySVG(&b, "none", nil); err != nil || checkSVG(t, b.Bytes()) != 0 {
		t.Errorf("empty chart: %v", err)
	}
}

// bench --json prints one JSON object and nothing else on stdout: every
// scenario, with its counts and latency percentiles in order.
func TestBenchJSON(t *testing.T) {
	t.Setenv(envNodes, "")
	// A 20 s TTL: each node's answer may take a second (TTL/20), which
	// leaves a loaded machine room (2 s, 100 ms per node, failed a
	// release at load 10).
	r := runCLI(t, "bench", "--json", "--embedded", "1", "--duration", "300ms", "--parallel", "3", "--ttl", "20s")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("bench --json: %v", r)
	}
	var rep benchJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Errorf("more than the report on stdout:\n%s", r.stdout)
	}
	if rep.Nodes != "1 embedded redis-server node (restart guard off: they are fresh)" ||
		rep.TTLMs != 20000 || rep.DurationMs != 300 || rep.Interrupted {
		t.Errorf("report header: %+v", rep)
	}
	want := []struct {
		name    string
		workers int
	}{{"uncontended", 1}, {"parallel", 3}, {"contended", 3}}
	if len(rep.Scenarios) != len(want) {
		t.Fatalf("%d scenarios, want %d: %+v", len(rep.Scenarios), len(want), rep.Scenarios)
	}
	for i, sc := range rep.Scenarios {
		if sc.Name != want[i].name || sc.Workers != want[i].workers {
			t.Errorf("scenario %d: %s with %d workers, want %s with %d", i, sc.Name, sc.Workers, want[i].name, want[i].workers)
		}
		if sc.Locks < 1 || sc.Errors != 0 || sc.FirstError != "" || sc.Acquire == nil || sc.Release == nil {
			t.Errorf("%s: %+v", sc.Name, sc)
			continue
		}
		if rate := float64(sc.Locks) / (float64(sc.ElapsedNs) / 1e9); sc.LocksPerSecond < rate*0.999 || sc.LocksPerSecond > rate*1.001 {
			t.Errorf("%s: %v locks/s, but %d locks in %v ns", sc.Name, sc.LocksPerSecond, sc.Locks, sc.ElapsedNs)
		}
		for _, l := range []*latencyJSON{sc.Acquire, sc.Release} {
			if l.P50 <= 0 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max {
				t.Errorf("%s: percentiles out of order: %+v", sc.Name, *l)
			}
		}
	}
	// A scenario that obtained no lock has null latencies.
	empty := benchReport("x", benchConfig{}, []benchResult{{scenario: scenario{name: "contended", workers: 2}, elapsed: time.Second}}, true)
	b, err := json.Marshal(empty.Scenarios[0])
	if err != nil || !strings.Contains(string(b), `"acquire_ns":null`) || !empty.Interrupted {
		t.Errorf("no lock obtained: %s, %v", b, err)
	}
}

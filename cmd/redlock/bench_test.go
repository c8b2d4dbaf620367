package main

import (
	"bytes"
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

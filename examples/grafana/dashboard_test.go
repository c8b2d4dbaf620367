package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redlock-go/redlock/redlockprom"
)

const file = "redlock-dashboard.json"

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", file, err)
	}
	return d
}

// exported lists the metric names a redlockprom Hook registers, from the
// descriptors of its collectors.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := &capture{}
	if _, err := redlockprom.New(reg); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range reg.cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := make(map[string]bool)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in descriptor %s", d)
		}
		names[m[1]] = true
	}
	if len(names) == 0 {
		t.Fatal("redlockprom registered no metric")
	}
	return names
}

// capture is a Registerer that keeps what is registered on it.
type capture struct{ cs []prometheus.Collector }

func (r *capture) Register(c prometheus.Collector) error   { r.cs = append(r.cs, c); return nil }
func (r *capture) MustRegister(cs ...prometheus.Collector) { r.cs = append(r.cs, cs...) }
func (r *capture) Unregister(prometheus.Collector) bool    { return false }

var metricRE = regexp.MustCompile(`\bredlock_[a-z0-9_]+`)

// metric maps a series name of a query to its metric: a histogram's
// _bucket, _sum and _count series belong to it.
func metric(series string, names map[string]bool) string {
	if names[series] {
		return series
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && names[base] {
			return base
		}
	}
	return series
}

func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	d := load(t)
	names := exported(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard has title %q, uid %q; want both", d.Title, d.UID)
	}
	used := make(map[string]bool)
	check := func(where, q string) {
		found := metricRE.FindAllString(q, -1)
		if len(found) == 0 {
			t.Errorf("%s: query %q names no redlock metric", where, q)
		}
		for _, s := range found {
			m := metric(s, names)
			if !names[m] {
				t.Errorf("%s: query %q names %s, which redlockprom does not export", where, q, s)
			}
			used[m] = true
		}
		if strings.Count(q, "(") != strings.Count(q, ")") || strings.Count(q, "{") != strings.Count(q, "}") {
			t.Errorf("%s: query %q has unbalanced brackets", where, q)
		}
	}
	ids := make(map[int]bool)
	for _, p := range d.Panels {
		where := "panel " + p.Title
		if p.Title == "" || ids[p.ID] {
			t.Errorf("panel %d: empty title or duplicate id", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: data source %q, want the dashboard's variable", where, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, q := range p.Targets {
			check(where, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		var q struct {
			Query string `json:"query"`
		}
		if len(v.Query) > 0 && v.Query[0] == '{' {
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatal(err)
			}
			check("variable "+v.Name, q.Query)
		}
	}
	var missing []string
	for n := range names {
		if !used[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no panel shows %v", missing)
	}
}

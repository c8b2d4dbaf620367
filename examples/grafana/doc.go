// Package grafana holds redlock's Grafana dashboard, redlock-dashboard.json,
// for the metrics of the redlockprom adapter. Import the file in Grafana
// (Dashboards → New → Import) and pick a Prometheus data source; the job
// variable selects the scraped services.
//
// The package has no code: its test checks that the file is valid JSON,
// that every query names only metrics redlockprom exports, and that every
// metric redlockprom exports has a panel.
package grafana

package status

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is what a cozy-aio process's /metrics says about it.
type Metrics struct {
	// Up is set when /metrics answered.
	Up bool `json:"up"`
	// Phase is the bootstrap phase (cozy_aio_bootstrap_phase): network or
	// all; empty for an engine run without bootstrap.
	Phase string `json:"phase,omitempty"`
	// Leader is cozy_aio_leader.
	Leader bool `json:"leader"`
	// Shards are the Helm shards by ID.
	Shards []Shard `json:"shards"`
	// Requests are the API requests so far by HTTP method
	// (rest_client_requests_total).
	Requests map[string]int `json:"requests,omitempty"`
	// Runs sums cozy_aio_tenant_runs_succeeded_total over the tenants;
	// Running sums the running Helm items over the shards.
	Runs    int `json:"runs"`
	Running int `json:"running"`
	// Remote are the remote clusters the process holds clients for, by
	// the Secret or ConfigMap they come from.
	Remote map[string]*RemoteMetrics `json:"remote,omitempty"`
}

// RemoteMetrics is what /metrics says of one remote cluster.
type RemoteMetrics struct {
	Requests    int       `json:"requests"`
	Errors      int       `json:"errors"`
	LastContact time.Time `json:"lastContact,omitzero"`
}

// Owned returns the IDs of the shards this process owns.
func (m Metrics) Owned() []int {
	var out []int
	for _, s := range m.Shards {
		if s.Owned {
			out = append(out, s.ID)
		}
	}
	return out
}

// Shard is one Helm shard as the metrics report it.
type Shard struct {
	ID int `json:"id"`
	// Load is the weight (HelmReleases) of the tenants on the shard.
	Load    int `json:"load"`
	Tenants int `json:"tenants"`
	// Queued items are ready to run, Waiting ones in backoff or delay.
	Queued  int `json:"queued"`
	Waiting int `json:"waiting"`
	Running int `json:"running"`
	// Owned is set when this process runs the shard's work.
	Owned bool `json:"owned"`
}

// families selects the metric families Scrape reads: the whole exposition
// holds a duration histogram per object, about 1.5 MB at 1,000 releases.
var familyNames = []string{
	"cozy_aio_bootstrap_phase", "cozy_aio_shard_load", "cozy_aio_shard_tenants", "rest_client_requests_total",
	"cozy_aio_leader", "cozy_aio_shard_owned", "cozy_aio_tenant_runs_succeeded_total", "cozy_aio_shard_items",
	"cozy_aio_remote_cluster_requests_total", "cozy_aio_remote_cluster_errors_total",
	"cozy_aio_remote_cluster_last_contact_timestamp_seconds",
}

var families = url.Values{"name[]": familyNames}.Encode()

// Scrape reads the /metrics of the cozy-aio process at addr (host:port of
// its --health-addr) once.
func Scrape(ctx context.Context, addr string) (Metrics, error) {
	var m Metrics
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics?"+families, nil)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("reading metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("reading metrics from %s: %s", addr, resp.Status)
	}
	r := newReading()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, labels, value, ok := ParseSample(sc.Text())
		if !ok {
			continue
		}
		r.add(name, labels, value)
	}
	if err := sc.Err(); err != nil {
		return r.m, fmt.Errorf("reading metrics from %s: %w", addr, err)
	}
	return r.done(), nil
}

// reading gathers samples into Metrics, the shards by ID as they come.
type reading struct {
	m      Metrics
	shards map[int]*Shard
}

func newReading() *reading {
	return &reading{m: Metrics{Requests: map[string]int{}}, shards: map[int]*Shard{}}
}

func (r *reading) shard(label string) *Shard {
	id, err := strconv.Atoi(label)
	if err != nil {
		return &Shard{}
	}
	if r.shards[id] == nil {
		r.shards[id] = &Shard{ID: id}
	}
	return r.shards[id]
}

func (r *reading) add(name string, labels map[string]string, value float64) {
	r.m.add(name, labels, value, r.shard)
}

// done returns the metrics read, the shards sorted by ID.
func (r *reading) done() Metrics {
	r.m.Up = true
	for _, s := range r.shards {
		r.m.Shards = append(r.m.Shards, *s)
	}
	sort.Slice(r.m.Shards, func(i, j int) bool { return r.m.Shards[i].ID < r.m.Shards[j].ID })
	return r.m
}

func (m *Metrics) add(name string, labels map[string]string, value float64, shard func(string) *Shard) {
	switch name {
	case "cozy_aio_bootstrap_phase":
		if value == 1 {
			m.Phase = labels["phase"]
		}
	case "cozy_aio_shard_load":
		shard(labels["shard"]).Load = int(value)
	case "cozy_aio_shard_tenants":
		shard(labels["shard"]).Tenants = int(value)
	case "cozy_aio_shard_owned":
		shard(labels["shard"]).Owned = value == 1
	case "cozy_aio_shard_items":
		s := shard(labels["shard"])
		switch labels["state"] {
		case "queued":
			s.Queued = int(value)
		case "waiting":
			s.Waiting = int(value)
		case "running":
			s.Running = int(value)
			m.Running += int(value)
		}
	case "rest_client_requests_total":
		m.Requests[labels["method"]] += int(value)
	case "cozy_aio_leader":
		m.Leader = value == 1
	case "cozy_aio_tenant_runs_succeeded_total":
		m.Runs += int(value)
	case "cozy_aio_remote_cluster_requests_total", "cozy_aio_remote_cluster_errors_total",
		"cozy_aio_remote_cluster_last_contact_timestamp_seconds":
		m.addRemote(name, labels, value)
	}
}

func (m *Metrics) addRemote(name string, labels map[string]string, value float64) {
	if m.Remote == nil {
		m.Remote = map[string]*RemoteMetrics{}
	}
	r := m.Remote[labels["cluster"]]
	if r == nil {
		r = &RemoteMetrics{}
		m.Remote[labels["cluster"]] = r
	}
	switch name {
	case "cozy_aio_remote_cluster_requests_total":
		r.Requests = int(value)
	case "cozy_aio_remote_cluster_errors_total":
		r.Errors = int(value)
	default:
		if value > 0 {
			r.LastContact = time.Unix(0, int64(value*1e9))
		}
	}
}

// ParseSample reads `name{label="value",...} number` or `name number` from
// the Prometheus text format; label values hold no quote or comma in the
// samples read.
func ParseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if strings.HasPrefix(line, "#") {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	open := strings.IndexByte(line, '{')
	end := strings.LastIndexByte(line, '}')
	if open < 0 && end < 0 {
		// A sample without labels: `name number`.
		name, v, found := strings.Cut(line, " ")
		value, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return name, labels, value, found && err == nil
	}
	if open < 0 || end < open {
		return "", nil, 0, false
	}
	for _, pair := range strings.Split(line[open+1:end], ",") {
		if k, v, found := strings.Cut(pair, "="); found {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
	return line[:open], labels, value, err == nil
}

// Gathered reads the same figures as Scrape from a registry in this
// process, without HTTP: the status page's source.
func Gathered(g prometheus.Gatherer) Metrics {
	r := newReading()
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return r.m
	}
	wanted := map[string]bool{}
	for _, n := range familyNames {
		wanted[n] = true
	}
	for _, mf := range mfs {
		if !wanted[mf.GetName()] {
			continue
		}
		for _, mm := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mm.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			var v float64
			switch {
			case mm.Gauge != nil:
				v = mm.GetGauge().GetValue()
			case mm.Counter != nil:
				v = mm.GetCounter().GetValue()
			case mm.Untyped != nil:
				v = mm.GetUntyped().GetValue()
			default:
				continue
			}
			r.add(mf.GetName(), labels, v)
		}
	}
	return r.done()
}

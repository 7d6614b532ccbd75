package replicas

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/shard"
)

// poolCollector exports the Helm shard pool: the load of each shard, its
// queue depth, and the time each tenant's items waited for a worker.
type poolCollector struct {
	pool                        *shard.Pool
	owns                        func(int) bool
	leading                     func() bool
	owned, leader               *prometheus.Desc
	load, tenants, items        *prometheus.Desc
	waitSeconds, waits, waitMax *prometheus.Desc
	succeeded, failed           *prometheus.Desc
}

func newPoolCollector(p *shard.Pool, owns func(int) bool, leading func() bool) *poolCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &poolCollector{
		pool:        p,
		owns:        owns,
		leading:     leading,
		owned:       d("cozy_aio_shard_owned", "1 when this replica runs the Helm shard's work (it holds the shard's Lease, or runs alone).", "shard"),
		leader:      d("cozy_aio_leader", "1 when this replica leads: it runs the source, ArtifactGenerator and Kustomization reconcilers (always 1 when alone)."),
		load:        d("cozy_aio_shard_load", "Total weight (HelmReleases) of the tenants placed on a Helm shard.", "shard"),
		tenants:     d("cozy_aio_shard_tenants", "Tenants placed on a Helm shard.", "shard"),
		items:       d("cozy_aio_shard_items", "Helm work items on a shard: queued (ready to run), waiting (backoff or delay) and running.", "shard", "state"),
		waitSeconds: d("cozy_aio_tenant_wait_seconds_total", "Time a tenant's Helm items spent ready before a worker took them.", "tenant"),
		waits:       d("cozy_aio_tenant_waits_total", "Helm items of a tenant that a worker started.", "tenant"),
		waitMax:     d("cozy_aio_tenant_wait_seconds_max", "Longest time one of a tenant's Helm items waited for a worker.", "tenant"),
		succeeded:   d("cozy_aio_tenant_runs_succeeded_total", "Helm runs of a tenant that succeeded.", "tenant"),
		failed:      d("cozy_aio_tenant_runs_failed_total", "Helm runs of a tenant that failed.", "tenant"),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.owned, c.leader, c.load, c.tenants, c.items, c.waitSeconds, c.waits, c.waitMax, c.succeeded, c.failed} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, b2f(c.leading()))
	for _, s := range st.Shards {
		id := strconv.Itoa(s.ID)
		ch <- prometheus.MustNewConstMetric(c.load, prometheus.GaugeValue, float64(s.Load), id)
		ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, b2f(c.owns(s.ID)), id)
		ch <- prometheus.MustNewConstMetric(c.tenants, prometheus.GaugeValue, float64(s.Tenants), id)
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(s.Queued), id, "queued")
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(s.Waiting), id, "waiting")
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(s.Running), id, "running")
	}
	for _, t := range st.Tenants {
		ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, t.WaitTotal.Seconds(), t.ID)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(t.Waits), t.ID)
		ch <- prometheus.MustNewConstMetric(c.waitMax, prometheus.GaugeValue, t.WaitMax.Seconds(), t.ID)
		ch <- prometheus.MustNewConstMetric(c.succeeded, prometheus.CounterValue, float64(t.Succeeded), t.ID)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(t.Failed), t.ID)
	}
}

// RegisterPool exports the pool in registry: what runs where (owns: the
// shards whose work runs here; leading: whether this replica leads). A
// later engine in the same process takes the place of an earlier one.
func RegisterPool(registry prometheus.Registerer, p *shard.Pool, owns func(int) bool, leading func() bool) error {
	return frame.RegisterReplacing(registry, newPoolCollector(p, owns, leading))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

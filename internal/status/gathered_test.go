package status

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gathered reads from a registry in the process what Scrape reads over
// HTTP: the phase, the shards by ID, the remote clusters.
func TestGatheredReadsARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	phase := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cozy_aio_bootstrap_phase"}, []string{"phase"})
	load := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cozy_aio_shard_load"}, []string{"shard"})
	items := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cozy_aio_shard_items"}, []string{"shard", "state"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cozy_aio_remote_cluster_errors_total"}, []string{"cluster"})
	contact := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cozy_aio_remote_cluster_last_contact_timestamp_seconds"}, []string{"cluster"})
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "not_read"})
	reg.MustRegister(phase, load, items, errs, contact, other)
	phase.WithLabelValues("network").Set(0)
	phase.WithLabelValues("all").Set(1)
	load.WithLabelValues("1").Set(5)
	load.WithLabelValues("0").Set(3)
	items.WithLabelValues("1", "running").Set(2)
	errs.WithLabelValues("Secret ns/kc").Add(4)
	at := time.Unix(1_800_000_000, 0)
	contact.WithLabelValues("Secret ns/kc").Set(float64(at.Unix()))

	m := Gathered(reg)
	if !m.Up || m.Phase != "all" {
		t.Fatalf("up %t phase %q", m.Up, m.Phase)
	}
	if len(m.Shards) != 2 || m.Shards[0].ID != 0 || m.Shards[0].Load != 3 || m.Shards[1].Load != 5 || m.Shards[1].Running != 2 || m.Running != 2 {
		t.Fatalf("shards %+v running %d", m.Shards, m.Running)
	}
	r := m.Remote["Secret ns/kc"]
	if r == nil || r.Errors != 4 || !r.LastContact.Equal(at) {
		t.Fatalf("remote %+v", r)
	}
}

package engine

import (
	"strings"
	"testing"
	"time"

	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReconcileMetricsMatchFlux records the same reconciles with the
// engine's metrics and with Flux's Recorder and compares what /metrics
// shows: the same series, labels, help, buckets and values.
func TestReconcileMetricsMatchFlux(t *testing.T) {
	ours, theirs := prometheus.NewRegistry(), prometheus.NewRegistry()
	m := metricsFor(ours)
	rec := fluxmetrics.NewRecorder()
	theirs.MustRegister(rec.Collectors()[0], rec.Collectors()[2]) // the condition gauge and the duration histogram

	type rc struct {
		kind, ns, name string
		ago            time.Duration
		ready          metav1.ConditionStatus
	}
	for _, r := range []rc{
		{"HelmRelease", "tenant-a", "web", 5 * time.Millisecond, metav1.ConditionFalse},
		{"HelmRelease", "tenant-a", "web", 2 * time.Second, metav1.ConditionTrue},
		{"HelmRelease", "tenant-a", "web", 0, metav1.ConditionTrue},
		{"Kustomization", "flux-system", "apps", 40 * time.Minute, metav1.ConditionUnknown},
		{"GitRepository", "flux-system", "apps", 300 * time.Millisecond, ""},
	} {
		start := time.Now().Add(-r.ago)
		m.record(r.kind, r.ns, r.name, start, r.ready)
		ref := corev1.ObjectReference{Kind: r.kind, Namespace: r.ns, Name: r.name}
		rec.RecordDuration(ref, start)
		if r.ready != "" {
			rec.RecordCondition(ref, metav1.Condition{Type: "Ready", Status: r.ready})
		}
	}
	// The sums differ by the time between the two calls: compare the
	// rest exactly.
	text := func(reg *prometheus.Registry) string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, mt := range mf.Metric {
				if h := mt.Histogram; h != nil {
					h.SampleSum = nil
					h.CreatedTimestamp = nil
				}
			}
		}
		var b strings.Builder
		for _, mf := range mfs {
			b.WriteString(mf.String())
			b.WriteString("\n")
		}
		return b.String()
	}
	if got, want := text(ours), text(theirs); got != want {
		t.Fatalf("/metrics differs from Flux's Recorder:\nours:\n%s\nFlux:\n%s", got, want)
	}
	if n := testutil.CollectAndCount(m); n != 3+1+3+1+1 {
		t.Fatalf("%d series, want 9 (3 conditions and a histogram for two objects, a histogram for the third)", n)
	}

	m.forget("HelmRelease", "tenant-a", "web")
	if n := testutil.CollectAndCount(m, "gotk_reconcile_condition"); n != 3 {
		t.Fatalf("%d condition series after the HelmRelease went, want the Kustomization's 3", n)
	}
	if n := testutil.CollectAndCount(m, "gotk_reconcile_duration_seconds"); n != 2 {
		t.Fatalf("%d histograms after the HelmRelease went, want 2", n)
	}
}

// TestReconcileMetricsOnePerRegistry checks that engines sharing a
// registry share one collector.
func TestReconcileMetricsOnePerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := metricsFor(reg), metricsFor(reg)
	if a != b {
		t.Fatal("two engines on one registry got two collectors; the second would export nothing")
	}
	if c := metricsFor(prometheus.NewRegistry()); c == a {
		t.Fatal("two registries share a collector")
	}
}

package engine

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// TestReconcileMetricsMatchFlux records the same reconciles with the
// engine's metrics and with Flux's Recorder and compares what /metrics
// shows: the same series, labels, help, buckets and values.
func TestReconcileMetricsMatchFlux(t *testing.T) {
	ours, theirs := prometheus.NewRegistry(), prometheus.NewRegistry()
	m := frame.NewMetrics(ours)
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
		m.Record(r.kind, r.ns, r.name, start, r.ready)
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

	m.Forget("HelmRelease", "tenant-a", "web")
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
	a, b := frame.NewMetrics(reg), frame.NewMetrics(reg)
	if a != b {
		t.Fatal("two engines on one registry got two collectors; the second would export nothing")
	}
	if c := frame.NewMetrics(prometheus.NewRegistry()); c == a {
		t.Fatal("two registries share a collector")
	}
}

// TestMetricsHandlerWritesWhatGatherWould checks the engine's /metrics:
// the reconcile series it writes from its counters are, family by family,
// what client_golang's handler writes from a Gather, and the registry's
// other series are there too.
func TestMetricsHandlerWritesWhatGatherWould(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := frame.NewMetrics(reg)
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zz_other_total", Help: "Another series."}, []string{"x"})
	other.WithLabelValues("a").Add(3)
	reg.MustRegister(other)
	start := time.Now()
	for _, r := range []struct {
		kind, ns, name string
		ago            time.Duration
		ready          metav1.ConditionStatus
	}{
		{"HelmRelease", "tenant-b", "web", 20 * time.Millisecond, metav1.ConditionTrue},
		{"HelmRelease", "tenant-a", "web", 3 * time.Second, metav1.ConditionFalse},
		{"HelmRelease", "tenant-a", "web", 0, metav1.ConditionUnknown},
		{"HelmRelease", "tenant-a", "api", time.Hour, metav1.ConditionTrue},
		{"Kustomization", "flux-system", `odd"name\\with` + "\n", 90 * time.Second, metav1.ConditionTrue},
		{"GitRepository", "flux-system", "apps", 300 * time.Millisecond, ""},
	} {
		m.Record(r.kind, r.ns, r.name, start.Add(-r.ago), r.ready)
	}
	scrape := func(h interface {
		ServeHTTP(w http.ResponseWriter, r *http.Request)
	}) map[string]string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Fatalf("Content-Type %q", ct)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		body := rec.Body.String()
		families, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("/metrics does not parse: %v\n%s", err, body)
		}
		out := map[string]string{}
		for name, f := range families {
			var b strings.Builder
			if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
				t.Fatal(err)
			}
			out[name] = b.String()
		}
		return out
	}
	ours := scrape(frame.MetricsHandler(reg, m))
	theirs := scrape(promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}))
	for _, name := range []string{"gotk_reconcile_condition", "gotk_reconcile_duration_seconds", "zz_other_total"} {
		if ours[name] == "" {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if len(ours) != len(theirs) {
		t.Errorf("%d families, client_golang's handler writes %d", len(ours), len(theirs))
	}
	for name, want := range theirs {
		if ours[name] != want {
			t.Errorf("%s differs:\nours:\n%s\nclient_golang:\n%s", name, ours[name], want)
		}
	}
	if n := testutil.CollectAndCount(m); n != 4*3+5 {
		t.Errorf("Gather after a scrape sees %d series, want 17: the collector stayed muted", n)
	}
}

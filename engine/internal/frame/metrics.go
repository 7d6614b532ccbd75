package frame

import (
	"bufio"
	"cmp"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// reconcileMetrics exports the series Flux's controllers export for every
// object they reconcile, with Flux's names, labels, help and buckets
// (fluxcd/pkg/runtime/metrics.Recorder):
//
//	gotk_reconcile_condition{kind,name,namespace,type="Ready",status}  1 for the status the Ready condition has, 0 for the other two
//	gotk_reconcile_duration_seconds{kind,name,namespace}               a histogram of reconcile durations
//
// Flux's Recorder keeps a client_golang gauge per object and status and a
// histogram per object, about 5.7 KB per object (measured with a heap
// profile at 3,000 HelmReleases: 17 MB of the 59 MB live heap, the largest
// item that grows with the objects). This keeps a counter array per object
// (about 0.2 KB) and builds the series when /metrics is scraped.
//
// The series of an object go when the object does (Flux deletes them when
// it finalizes an object).
//
// Gathering builds a protobuf message per series, about 2.7 KB per object
// that lives until the scrape is written (measured at 3,000 HelmReleases: 8
// MB of a 42 MB live heap while /metrics was read). The engine's own
// /metrics handler writes these series as text straight from the counters
// instead (writeText): during its Gather of the registry the collector is
// muted.
type Metrics struct {
	mu   sync.Mutex
	objs map[metricKey]*objectMetrics
	// exported is set when this collector is the registry's (metricsFor):
	// only then does the handler write its series.
	exported bool
	// muted counts the engine /metrics handlers gathering the registry now;
	// while it is above zero Collect sends nothing.
	muted atomic.Int32
}

type metricKey struct{ kind, namespace, name string }

// objectMetrics are one object's series.
type objectMetrics struct {
	// ready is the Ready condition's status; "" until it has one.
	ready metav1.ConditionStatus
	count uint64
	sum   float64
	// buckets counts the reconciles per bucket (not cumulative); the last
	// is above the largest bound.
	buckets [len(durationBounds) + 1]uint32
}

const (
	conditionHelp = "The current condition status of a GitOps Toolkit resource reconciliation."
	durationHelp  = "The duration in seconds of a GitOps Toolkit resource reconciliation."
)

// durationBounds are the histogram's upper bounds, Flux's: ten buckets from
// 10 ms to 30 minutes (prometheus.ExponentialBucketsRange(10e-3, 1800, 10)).
var durationBounds = [10]float64(prometheus.ExponentialBucketsRange(10e-3, 1800, 10))

var (
	conditionDesc = prometheus.NewDesc("gotk_reconcile_condition", conditionHelp,
		[]string{"kind", "name", "namespace", "type", "status"}, nil)
	durationDesc = prometheus.NewDesc("gotk_reconcile_duration_seconds", durationHelp,
		[]string{"kind", "name", "namespace"}, nil)
	// conditionStatuses in the order Gather sorts their series.
	conditionStatuses = [...]metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionUnknown}
)

func newReconcileMetrics() *Metrics {
	return &Metrics{objs: map[metricKey]*objectMetrics{}}
}

// record adds one reconcile of the object that started at start and left
// its Ready condition at ready ("" when it has none).
func (m *Metrics) Record(kind, namespace, name string, start time.Time, ready metav1.ConditionStatus) {
	d := time.Since(start).Seconds()
	k := metricKey{kind: kind, namespace: namespace, name: name}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objs[k]
	if o == nil {
		o = &objectMetrics{}
		m.objs[k] = o
	}
	o.count++
	o.sum += d
	i := 0
	for i < len(durationBounds) && d > durationBounds[i] {
		i++
	}
	o.buckets[i]++
	if ready != "" {
		o.ready = ready
	}
}

// forget drops the object's series.
func (m *Metrics) Forget(kind, namespace, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, metricKey{kind: kind, namespace: namespace, name: name})
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- conditionDesc
	ch <- durationDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.muted.Load() > 0 {
		return
	}
	all := m.snapshot()
	for _, s := range all {
		k, o := s.key, s.obj
		if o.ready != "" {
			for _, st := range conditionStatuses {
				v := 0.0
				if st == o.ready {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, v,
					k.kind, k.name, k.namespace, "Ready", string(st))
			}
		}
		buckets := make(map[float64]uint64, len(durationBounds))
		var cum uint64
		for i, b := range durationBounds {
			cum += uint64(o.buckets[i])
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogram(durationDesc, o.count, o.sum, buckets, k.kind, k.name, k.namespace)
	}
}

// metricsFor returns the reconcile metrics registered in registry, one per
// registry, so that several engines can share a process and a registry.
func NewMetrics(registry *prometheus.Registry) *Metrics {
	m := newReconcileMetrics()
	err := registry.Register(m)
	m.exported = err == nil
	if err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(*Metrics); ok {
				return existing
			}
		}
		// Another collector (an embedder's Flux Recorder) exports these
		// names already: keep counting, unexported.
	}
	return m
}

// snapshot copies every object's counters, sorted as Gather sorts series:
// by kind, name and namespace.
func (m *Metrics) snapshot() []objectSeries {
	m.mu.Lock()
	all := make([]objectSeries, 0, len(m.objs))
	for k, o := range m.objs {
		all = append(all, objectSeries{key: k, obj: *o})
	}
	m.mu.Unlock()
	slices.SortFunc(all, func(a, b objectSeries) int {
		return cmp.Or(strings.Compare(a.key.kind, b.key.kind), strings.Compare(a.key.name, b.key.name),
			strings.Compare(a.key.namespace, b.key.namespace))
	})
	return all
}

type objectSeries struct {
	key metricKey
	obj objectMetrics
}

// writeText writes the series in Prometheus' text format, as the text
// encoder writes what Collect sends: the same lines in the same order.
func (m *Metrics) writeText(w *bufio.Writer) error {
	all := m.snapshot()
	var num []byte
	float := func(f float64) {
		switch {
		case math.IsInf(f, +1):
			w.WriteString("+Inf")
		default:
			num = strconv.AppendFloat(num[:0], f, 'g', -1, 64)
			w.Write(num)
		}
	}
	labels := func(k metricKey) {
		w.WriteString(`{kind="`)
		writeLabelValue(w, k.kind)
		w.WriteString(`",name="`)
		writeLabelValue(w, k.name)
		w.WriteString(`",namespace="`)
		writeLabelValue(w, k.namespace)
		w.WriteByte('"')
	}
	ready := false
	for i := range all {
		ready = ready || all[i].obj.ready != ""
	}
	if ready {
		w.WriteString("# HELP gotk_reconcile_condition " + conditionHelp + "\n# TYPE gotk_reconcile_condition gauge\n")
		for i := range all {
			s := &all[i]
			if s.obj.ready == "" {
				continue
			}
			for _, st := range conditionStatuses {
				w.WriteString("gotk_reconcile_condition")
				labels(s.key)
				w.WriteString(`,status="` + string(st) + `",type="Ready"} `)
				if st == s.obj.ready {
					w.WriteString("1\n")
				} else {
					w.WriteString("0\n")
				}
			}
		}
	}
	if len(all) > 0 {
		w.WriteString("# HELP gotk_reconcile_duration_seconds " + durationHelp + "\n# TYPE gotk_reconcile_duration_seconds histogram\n")
	}
	for i := range all {
		s := &all[i]
		var cum uint64
		for b := range len(durationBounds) + 1 {
			cum += uint64(s.obj.buckets[b])
			if b == len(durationBounds) {
				cum = s.obj.count
			}
			w.WriteString("gotk_reconcile_duration_seconds_bucket")
			labels(s.key)
			w.WriteString(`,le="`)
			if b < len(durationBounds) {
				float(durationBounds[b])
			} else {
				float(math.Inf(+1))
			}
			w.WriteString(`"} `)
			float(float64(cum))
			w.WriteByte('\n')
		}
		w.WriteString("gotk_reconcile_duration_seconds_sum")
		labels(s.key)
		w.WriteString("} ")
		float(s.obj.sum)
		w.WriteString("\ngotk_reconcile_duration_seconds_count")
		labels(s.key)
		w.WriteString("} ")
		float(float64(s.obj.count))
		w.WriteByte('\n')
	}
	return w.Flush()
}

// writeLabelValue escapes a label value as the text format does.
func writeLabelValue(w *bufio.Writer, v string) {
	if !strings.ContainsAny(v, "\\\"\n") {
		w.WriteString(v)
		return
	}
	for _, r := range v {
		switch r {
		case '\\':
			w.WriteString(`\\`)
		case '"':
			w.WriteString(`\"`)
		case '\n':
			w.WriteString(`\n`)
		default:
			w.WriteRune(r)
		}
	}
}

// metricsHandler serves the registry in the text format, with the
// reconcile metrics written from their counters rather than gathered.
//
// While it gathers, the collector is muted: a Gather of the same registry
// by someone else at that moment (an embedder serving it too) leaves the
// gotk series out of that one scrape.
func MetricsHandler(registry prometheus.Gatherer, m *Metrics) http.Handler {
	if !m.exported {
		return promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.muted.Add(1)
		families, err := registry.Gather()
		m.muted.Add(-1)
		if err != nil && len(families) == 0 {
			http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		bw := bufio.NewWriterSize(w, 32<<10)
		enc := expfmt.NewEncoder(bw, format)
		for _, f := range families {
			if err := enc.Encode(f); err != nil {
				return
			}
		}
		_ = m.writeText(bw)
	})
}

// apiHostOnly drops client-go's per-host request series (rest_client_*)
// of every host but the engine's own API server: a remote cluster's
// address is the tenant's to write, and no label value may be a string a
// tenant wrote freely. cozy_aio_remote_cluster_requests_total counts the
// remote clusters' requests by their Secret instead.
type APIHostOnly struct {
	Gatherer prometheus.Gatherer
	Host     string // host[:port] of the engine's API server
}

func (a APIHostOnly) Gather() ([]*dto.MetricFamily, error) {
	families, err := a.Gatherer.Gather()
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "rest_client_") {
			continue
		}
		f.Metric = slices.DeleteFunc(f.Metric, func(m *dto.Metric) bool {
			for _, l := range m.GetLabel() {
				if l.GetName() == "host" && l.GetValue() != a.Host {
					return true
				}
			}
			return false
		})
	}
	families = slices.DeleteFunc(families, func(f *dto.MetricFamily) bool { return len(f.Metric) == 0 })
	return families, err
}

// RegisterReplacing registers c in registry in place of an equal
// collector an earlier engine of the process registered.
func RegisterReplacing(registry prometheus.Registerer, c prometheus.Collector) error {
	err := registry.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		registry.Unregister(are.ExistingCollector)
		err = registry.Register(c)
	}
	return err
}

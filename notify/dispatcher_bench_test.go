package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkRecordFailingBurst records a burst of 1,000 distinct failing
// events (1,000 HelmReleases failing at once), with and without an Alert
// to a generic Provider that takes 200 ms per request. ns/op is what the
// reconciles that record those events pay in all; queue-KiB is the heap
// the full queue holds; dropped is the events beyond the queue.
func BenchmarkRecordFailingBurst(b *testing.B) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
	}))
	defer slow.Close()
	events := make([]*Event, 1000)
	for i := range events {
		e := sampleEvent()
		e.InvolvedObject.Kind, e.InvolvedObject.Name = "HelmRelease", fmt.Sprint("release-", i)
		e.Message = "install retries exhausted: context deadline exceeded"
		events[i] = e
	}
	for _, withAlert := range []bool{false, true} {
		b.Run(fmt.Sprintf("alert=%v", withAlert), func(b *testing.B) {
			var dropped, queueKiB float64
			for b.Loop() {
				b.StopTimer()
				reg := prometheus.NewRegistry()
				d := NewDispatcher(DispatcherOptions{Registerer: reg})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { _ = d.Start(ctx); close(done) }()
				ref := types.NamespacedName{Namespace: "apps", Name: "slow"}
				if withAlert {
					_ = d.SetProvider(ref, Provider{Type: TypeGeneric, Address: slow.URL})
					d.SetAlert(types.NamespacedName{Namespace: "apps", Name: "all"}, Alert{Provider: ref, Severity: SeverityError,
						Sources: []Source{{Kind: "HelmRelease", Name: "*"}}})
				}
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.StartTimer()
				for _, e := range events {
					d.Record(e, nil)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				queueKiB = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 1024
				dropped = testutil.ToFloat64(d.m.results.WithLabelValues(ref.String(), "dropped"))
				cancel()
				<-done
				b.StartTimer()
			}
			b.ReportMetric(dropped, "dropped")
			b.ReportMetric(queueKiB, "queue-KiB")
		})
	}
}

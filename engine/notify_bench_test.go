package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// BenchmarkNotifyFailingBurst: 1,000 HelmReleases of one tenant fail at
// once (their chart source does not exist) while 50 unrelated HelmReleases
// of another tenant install a real chart, with and without an Alert that
// sends every event of the failing tenant to a generic Provider taking
// 200 ms per request. ns/op is the time until the 50 releases are Ready;
// heap-MiB is the heap in use then; sent and dropped count the
// notifications.
//
//	go test ./engine -run '^$' -bench 'BenchmarkNotifyFailingBurst/alert=true' -benchtime 1x
func BenchmarkNotifyFailingBurst(b *testing.B) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
	}))
	defer slow.Close()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.PushChart(context.Background(), "charts/demo", demoChart("1.0.0")); err != nil {
		b.Fatal(err)
	}
	for _, withAlert := range []bool{false, true} {
		b.Run(fmt.Sprintf("alert=%v", withAlert), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				ctx := context.Background()
				failing, unrelated := cp.Namespace(b), cp.Namespace(b)
				e := startEngine(b, engine.Options{Destinations: loopbackDestinations})
				objs := []client.Object{chartSource(unrelated, "demo", reg.Host(), "1.0.0")}
				if withAlert {
					objs = append(objs,
						&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: failing},
							Spec: notifyv1beta3.ProviderSpec{Type: "generic", Address: slow.URL}},
						&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "releases", Namespace: failing},
							Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "slow"},
								EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: helmv2.HelmReleaseKind, Name: "*"}}}})
				}
				for _, o := range objs {
					if err := cp.Client.Create(ctx, o); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(time.Second) // the Alert and Provider reach the dispatcher
				b.StartTimer()
				for i := range 1000 {
					if err := cp.Client.Create(ctx, helmRelease(failing, fmt.Sprintf("fail-%04d", i), "absent")); err != nil {
						b.Fatal(err)
					}
				}
				var hrs []*helmv2.HelmRelease
				for i := range 50 {
					hr := helmRelease(unrelated, fmt.Sprintf("app-%02d", i), "demo")
					if err := cp.Client.Create(ctx, hr); err != nil {
						b.Fatal(err)
					}
					hrs = append(hrs, hr)
				}
				waitAllReady(b, hrs)
				b.StopTimer()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
				if withAlert {
					b.ReportMetric(notificationCount(b, e, "sent"), "sent")
					b.ReportMetric(notificationCount(b, e, "dropped"), "dropped")
				}
				b.StartTimer()
			}
		})
	}
}

// notificationCount sums cozy_aio_notifications_total{result}.
func notificationCount(b *testing.B, e *engine.Engine, result string) float64 {
	mfs, err := e.Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "cozy_aio_notifications_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

func waitAllReady[T interface {
	client.Object
	conditions.Getter
}](b *testing.B, objs []T) {
	deadline := time.Now().Add(5 * time.Minute)
	for _, k := range objs {
		for {
			if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(k), k); err == nil && conditions.IsReady(k) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s never became Ready", k.GetName())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// BenchmarkWebhookToNewArtifact measures the time from a commit to the new
// artifact of its GitRepository: after a signed GitHub push webhook (the
// interval is an hour), against the interval-driven path (interval 10s).
//
//	go test ./engine -run '^$' -bench BenchmarkWebhookToNewArtifact -benchtime 3x
func BenchmarkWebhookToNewArtifact(b *testing.B) {
	for _, viaWebhook := range []bool{true, false} {
		name := "webhook"
		if !viaWebhook {
			name = "interval=10s"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			ns := cp.Namespace(b)
			repo, gr := gitSource(b, ns, "apps", map[string]string{"a.yaml": configMap("a", ns)})
			if !viaWebhook {
				gr.Spec.Interval = metav1.Duration{Duration: 10 * time.Second}
				if err := cp.Client.Update(ctx, gr); err != nil {
					b.Fatal(err)
				}
			}
			addr := webhookAddr(b)
			startEngine(b, engine.Options{Destinations: loopbackDestinations, WebhookAddr: addr})
			rcv := &notifyv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "gh", Namespace: ns},
				Spec: notifyv1.ReceiverSpec{Type: "github", SecretRef: &meta.LocalObjectReference{Name: "tok"},
					Resources: []notifyv1.ReceiverResource{{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "apps"}}}}}
			if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: ns}, StringData: map[string]string{"token": "t"}}); err != nil {
				b.Fatal(err)
			}
			if err := cp.Client.Create(ctx, rcv); err != nil {
				b.Fatal(err)
			}
			for {
				if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(rcv), rcv); err == nil && conditions.IsReady(rcv) &&
					cp.Client.Get(ctx, client.ObjectKeyFromObject(gr), gr) == nil && gr.Status.Artifact != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			i := 0
			for b.Loop() {
				i++
				sha, err := repo.Commit("main", map[string]string{"a.yaml": configMap(fmt.Sprint("a-", i), ns)}, "next")
				if err != nil {
					b.Fatal(err)
				}
				if viaWebhook {
					if code := githubPush(b, "http://"+addr+rcv.Status.WebhookPath, "t", fmt.Sprint("delivery-", i)); code != http.StatusOK {
						b.Fatalf("webhook answered %d", code)
					}
				}
				want := "main@sha1:" + sha
				deadline := time.Now().Add(time.Minute)
				for {
					if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(gr), gr); err == nil && gr.Status.Artifact != nil && gr.Status.Artifact.Revision == want {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("revision %s never stored", want)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

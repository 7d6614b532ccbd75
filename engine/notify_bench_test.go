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
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// BenchmarkNotifyFailingBurst: 1,000 HelmReleases fail at once (their
// chart source does not exist) while 50 unrelated Kustomizations are
// applied, with and without an Alert that sends every HelmRelease event to
// a generic Provider taking 200 ms per request. ns/op is the time until
// the 50 Kustomizations are Ready; heap-MiB is the heap in use then.
//
//	go test ./engine -run '^$' -bench BenchmarkNotifyFailingBurst -benchtime 1x
func BenchmarkNotifyFailingBurst(b *testing.B) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
	}))
	defer slow.Close()
	for _, withAlert := range []bool{false, true} {
		b.Run(fmt.Sprintf("alert=%v", withAlert), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				ctx := context.Background()
				ns := cp.Namespace(b)
				files := map[string]string{}
				for u := range 50 {
					files[fmt.Sprintf("u%02d/cm.yaml", u)] = configMap(fmt.Sprintf("cm-%02d", u), ns)
				}
				gitSource(b, ns, "apps", files)
				e := startEngine(b, engine.Options{})
				if withAlert {
					for _, o := range []client.Object{
						&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
							Spec: notifyv1beta3.ProviderSpec{Type: "generic", Address: slow.URL}},
						&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "releases", Namespace: ns},
							Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "slow"},
								EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: helmv2.HelmReleaseKind, Name: "*"}}}},
					} {
						if err := cp.Client.Create(ctx, o); err != nil {
							b.Fatal(err)
						}
					}
					time.Sleep(time.Second) // let the Alert and Provider reach the dispatcher
				}
				b.StartTimer()
				for i := range 1000 {
					hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fail-%04d", i), Namespace: ns},
						Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: time.Hour},
							ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "absent"}}}
					if err := cp.Client.Create(ctx, hr); err != nil {
						b.Fatal(err)
					}
				}
				var kss []*kustomizev1.Kustomization
				for u := range 50 {
					k := kustomization(ns, fmt.Sprintf("u%02d", u), "apps", fmt.Sprintf("./u%02d", u))
					if err := cp.Client.Create(ctx, k); err != nil {
						b.Fatal(err)
					}
					kss = append(kss, k)
				}
				waitAllReady(b, kss)
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

func waitAllReady(b *testing.B, kss []*kustomizev1.Kustomization) {
	deadline := time.Now().Add(5 * time.Minute)
	for _, k := range kss {
		for {
			if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(k), k); err == nil && conditions.IsReady(k) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s never became Ready", k.Name)
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
			startEngine(b, engine.Options{WebhookAddr: addr})
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

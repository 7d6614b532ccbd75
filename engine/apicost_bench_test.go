package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// BenchmarkAPIServerCost measures what one request of each kind a Helm
// release costs the API server and etcd, in CPU milliseconds, with 16
// concurrent writers as in bench-scale. It explains where bench-scale's
// time goes: the API server is its bottleneck.
//
//	go test ./engine -run '^$' -bench BenchmarkAPIServerCost -benchtime 1000x
func BenchmarkAPIServerCost(b *testing.B) {
	ctx := context.Background()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.New(cfg, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(pcfg)
	ns := make([]string, 10)
	for i := range ns {
		ns[i] = fmt.Sprintf("apicost-%d-%d", time.Now().UnixNano()%1e6, i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns[i]}}); err != nil {
			b.Fatal(err)
		}
	}
	var round atomic.Int64
	name := func(p string, i int) string { return fmt.Sprintf("%s-%d-%d", p, round.Load(), i) }
	var createHR func(i int) error
	hr := func(i int) *helmv2.HelmRelease {
		return &helmv2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: name("hr", i), Namespace: ns[i%10]},
			Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: time.Hour},
				ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "charts"}},
		}
	}
	createHR = func(i int) error { return c.Create(ctx, hr(i)) }
	cases := []struct {
		name  string
		setup func(i int) error // before the clock, for each i
		op    func(i int) error
	}{
		{"GET-missing-ConfigMap", nil, func(i int) error {
			return client.IgnoreNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns[i%10], Name: name("none", i)}, &corev1.ConfigMap{}))
		}},
		{"LIST-release-Secrets", nil, func(i int) error {
			_, err := cs.CoreV1().Secrets(ns[i%10]).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name("rel", i)})
			return err
		}},
		{"SSA-ConfigMap", nil, func(i int) error {
			cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: name("cm", i), Namespace: ns[i%10]}, Data: map[string]string{"a": "b"}}
			return c.Patch(ctx, cm, client.Apply, client.ForceOwnership, client.FieldOwner("helm"))
		}},
		{"POST-Event", nil, func(i int) error {
			_, err := cs.CoreV1().Events(ns[i%10]).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name("ev", i)},
				InvolvedObject: corev1.ObjectReference{Kind: "HelmRelease", Name: "x", Namespace: ns[i%10]},
				Reason:         "InstallSucceeded", Message: "Helm install succeeded", Type: "Normal"}, metav1.CreateOptions{})
			return err
		}},
		{"POST-HelmRelease", nil, func(i int) error { return c.Create(ctx, hr(i)) }},
		{"PATCH-HelmRelease-finalizer", createHR, func(i int) error {
			o := hr(i)
			p := client.MergeFrom(o.DeepCopy())
			controllerutil.AddFinalizer(o, engine.Finalizer)
			return c.Patch(ctx, o, p)
		}},
		{"PATCH-HelmRelease-status", createHR, func(i int) error {
			o := hr(i)
			p := client.MergeFrom(o.DeepCopy())
			o.Status.ObservedGeneration = 1
			o.Status.LastAttemptedRevision = "1.0.0"
			return c.Status().Patch(ctx, o, p)
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			round.Add(1) // fresh names for every run of the function
			if tc.setup != nil {
				b.StopTimer()
				testenv.Parallel(b.N, 16, func(i int) {
					if err := tc.setup(i); err != nil {
						b.Error(err)
					}
				})
				time.Sleep(500 * time.Millisecond)
				b.StartTimer()
			}
			a0, e0 := cpuSeconds(b, "kube-apiserver"), cpuSeconds(b, "etcd")
			b.ResetTimer()
			testenv.Parallel(b.N, 16, func(i int) {
				if err := tc.op(i); err != nil {
					b.Error(err)
				}
			})
			b.StopTimer()
			time.Sleep(500 * time.Millisecond) // let etcd and the watch cache catch up
			b.ReportMetric((cpuSeconds(b, "kube-apiserver")-a0)*1000/float64(b.N), "apiserver-ms/op")
			b.ReportMetric((cpuSeconds(b, "etcd")-e0)*1000/float64(b.N), "etcd-ms/op")
		})
	}
}

// cpuSeconds is the user+system CPU time of the one process named name:
// the test control plane runs alone on the machine (testenv's lock).
func cpuSeconds(b *testing.B, name string) float64 {
	out, err := exec.Command("pgrep", "-x", name).Output()
	if err != nil {
		b.Skipf("pgrep %s: %v", name, err)
	}
	stat, err := os.ReadFile("/proc/" + strings.Fields(string(out))[0] + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat))
	u, _ := strconv.ParseFloat(f[13], 64)
	s, _ := strconv.ParseFloat(f[14], 64)
	return (u + s) / 100 // USER_HZ
}

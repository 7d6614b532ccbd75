package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/health"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// BenchmarkIdleRemoteClusterMemory measures what one idle remote cluster
// costs the process: the registry entry the engine keeps per kubeconfig
// (its clients, a Helm manager with its discovery cache, REST mapper and
// metadata watches of the release records and of the kinds it installed,
// a waiter), after one release was installed through it, with the
// connections it left open. It builds 100 clusters (100 kubeconfigs of
// distinct users on the test API server), installs one chart of one
// ConfigMap through each, and reports the heap and goroutine stacks in use
// after a GC, per cluster, against the same process before them.
//
//	go test ./engine/cluster -run '^$' -bench BenchmarkIdleRemoteClusterMemory -benchtime 1x
func BenchmarkIdleRemoteClusterMemory(b *testing.B) {
	const clusters = 100
	ctx := context.Background()
	chart, err := testenv.TarGz(map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: one\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: b\n",
	}, "one/")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "one.tgz")
	if err := os.WriteFile(path, chart, 0o600); err != nil {
		b.Fatal(err)
	}
	type clients struct {
		mgr    *helm.Manager
		waiter *health.Waiter
		stop   context.CancelFunc
	}
	for range b.N {
		b.StopTimer()
		ns := cp.Namespace(b)
		var refs []*meta.KubeConfigReference
		for i := range clusters {
			kc, err := cp.Kubeconfig(fmt.Sprintf("tenant-%d", i), "system:masters")
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("kc-%d", i)
			if err := cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Data: map[string][]byte{"value": kc}}); err != nil {
				b.Fatal(err)
			}
			refs = append(refs, &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: name}})
		}
		reg, err := cluster.NewRegistry(cp.Client, cp.Client, cluster.RegistryOptions[*clients]{
			Local: func() (*clients, error) { return nil, nil },
			// As engine.remoteClients builds a remote cluster's.
			Build: func(cfg *rest.Config) (*clients, error) {
				wcfg := rest.CopyConfig(cfg)
				wcfg.Timeout = 0
				w, err := health.NewWaiter(wcfg, health.WaiterOptions{Unreachable: 10 * time.Second})
				if err != nil {
					return nil, err
				}
				cache, err := helm.NewCache(wcfg)
				if err != nil {
					return nil, err
				}
				cctx, stop := context.WithCancel(cluster.Background(ctx))
				go func() { _ = cache.Start(cctx) }()
				m, err := helm.New(cfg, helm.Options{Waiter: w, Cache: cache})
				if err != nil {
					stop()
					return nil, err
				}
				return &clients{mgr: m, waiter: w, stop: stop}, nil
			},
			Close: func(c *clients) { c.stop() },
			Load:  cluster.LoadOptions{Destinations: loopbackAllowed},
		})
		if err != nil {
			b.Fatal(err)
		}
		before := inUse()
		goroutines := runtime.NumGoroutine()
		b.StartTimer()
		for i, ref := range refs {
			c, err := reg.Get(ctx, ns, ref)
			if err != nil {
				b.Fatal(err)
			}
			rel := helm.Release{Name: fmt.Sprintf("one-%d", i), Namespace: ns}
			if _, err := c.Value.mgr.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: helm.Chart{Path: path}}}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if reg.Len() != clusters {
			b.Fatalf("%d clusters in the registry, want %d", reg.Len(), clusters)
		}
		after := inUse()
		b.ReportMetric(float64(after-before)/clusters, "B/cluster")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/clusters, "goroutines/cluster")
		runtime.KeepAlive(reg)
		for _, ref := range refs {
			if c, err := reg.Get(ctx, ns, ref); err == nil {
				c.Value.stop()
			}
		}
	}
}

// inUse is the heap and goroutine stacks in use after a GC.
func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

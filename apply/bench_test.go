package apply

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/health"
)

// Benchmarks of Apply against the envtest API server, with their peers in
// the same run: kubectl apply --server-side and raw concurrent SSA patches.
// See docs/benchmarks/apply.md for the command and the figures.
//
// COZY_BENCH_SIZES (default "1000,5000") sets the set sizes, and
// COZY_BENCH_KUBECTL_MAX (default 1000) the largest set given to kubectl,
// which is slow.

func benchSizes() []int {
	s := os.Getenv("COZY_BENCH_SIZES")
	if s == "" {
		s = "1000,5000"
	}
	var out []int
	for _, f := range splitComma(s) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// benchObjects returns n objects in ns: ConfigMaps, Deployments and
// headless Services in turn (headless, because envtest's service IP range
// has only 254 addresses).
func benchObjects(ns string, n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	for i := range n {
		name := fmt.Sprintf("obj-%05d", i)
		md := map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": name}}
		var o map[string]any
		switch i % 3 {
		case 0:
			o = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md,
				"data": map[string]any{"index": strconv.Itoa(i), "payload": "some configuration value"}}
		case 1:
			o = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
				"spec": map[string]any{
					"replicas": int64(1),
					"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
					"template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{"app": name}},
						"spec": map[string]any{"containers": []any{map[string]any{
							"name": "app", "image": "registry.example.com/app:1.0",
							"ports": []any{map[string]any{"containerPort": int64(8080)}},
						}}},
					},
				}}
		case 2:
			o = map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": md,
				"spec": map[string]any{"clusterIP": "None", "selector": map[string]any{"app": name},
					"ports": []any{map[string]any{"port": int64(80), "targetPort": int64(8080)}}}}
		}
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out
}

// countingConfig returns a copy of cfg whose requests are counted.
func countingConfig(cfg *rest.Config) (*rest.Config, *atomic.Int64) {
	var n atomic.Int64
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return cfg, &n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func report(b *testing.B, n int, elapsed time.Duration, requests int64) {
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "objects/s")
	b.ReportMetric(float64(requests)/float64(n*b.N), "requests/object")
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/apply")
}

func BenchmarkApply(b *testing.B) {
	kubectlMax := 1000
	if s := os.Getenv("COZY_BENCH_KUBECTL_MAX"); s != "" {
		kubectlMax, _ = strconv.Atoi(s)
	}
	// A freshly started API server is still warming up (its own
	// controllers, caches, the Go runtime): whatever runs first is slower.
	// Apply 1,000 objects before measuring anything.
	b.Run("warm-up", func(b *testing.B) { benchRaw(b, 1000) })
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d/cozy-first-cache", n), func(b *testing.B) { benchCozyFirst(b, n, true) })
		b.Run(fmt.Sprintf("n=%d/cozy-first-nocache", n), func(b *testing.B) { benchCozyFirst(b, n, false) })
		b.Run(fmt.Sprintf("n=%d/cozy-noop-cache", n), func(b *testing.B) { benchCozyNoop(b, n, true) })
		b.Run(fmt.Sprintf("n=%d/cozy-noop-nocache", n), func(b *testing.B) { benchCozyNoop(b, n, false) })
		b.Run(fmt.Sprintf("n=%d/raw-ssa-first", n), func(b *testing.B) { benchRaw(b, n) })
		if _, err := exec.LookPath("kubectl"); err == nil && n <= kubectlMax {
			b.Run(fmt.Sprintf("n=%d/kubectl", n), func(b *testing.B) { benchKubectl(b, n) })
		}
	}
}

func benchCozyFirst(b *testing.B, n int, withCache bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, requests := countingConfig(cp.Config)
	opts := Options{Concurrency: 64}
	if withCache {
		// A running engine has its Cache synced already: sync it here,
		// outside the timer, by watching the three resources.
		opts.Cache = startedCache(b, ctx)
	}
	a, err := New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	if withCache {
		a.warmCache(ctx, benchObjects("default", 3), time.Minute)
	}
	b.ReportAllocs()
	var elapsed time.Duration
	requests.Store(0)
	for range b.N {
		b.StopTimer()
		objs := benchObjects(cp.Namespace(b), n)
		b.StartTimer()
		start := time.Now()
		cs, err := a.Apply(context.Background(), objs, ApplyOptions{})
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if cs.Count(Created) != n {
			b.Fatalf("created %d of %d", cs.Count(Created), n)
		}
	}
	report(b, n, elapsed, requests.Load())
}

func benchCozyNoop(b *testing.B, n int, withCache bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, requests := countingConfig(cp.Config)
	opts := Options{Concurrency: 64}
	if withCache {
		opts.Cache = startedCache(b, ctx)
	}
	a, err := New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	objs := benchObjects(cp.Namespace(b), n)
	if _, err := a.Apply(ctx, objs, ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	if withCache {
		waitCacheCaughtUp(b, ctx, a, objs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	requests.Store(0)
	start := time.Now()
	for range b.N {
		cs, err := a.Apply(ctx, objs, ApplyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if cs.Count(Unchanged) != n {
			b.Fatalf("unchanged %d of %d", cs.Count(Unchanged), n)
		}
	}
	report(b, n, time.Since(start), requests.Load())
}

func startedCache(b *testing.B, ctx context.Context) *Cache {
	c, err := NewCache(cp.Config)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	for {
		c.mu.Lock()
		started := c.ctx != nil
		c.mu.Unlock()
		if started {
			return c
		}
		time.Sleep(time.Millisecond)
	}
}

// waitCacheCaughtUp waits until the cache's watches have seen the
// resourceVersion of every object's last apply.
func waitCacheCaughtUp(b *testing.B, ctx context.Context, a *Applier, objs []*unstructured.Unstructured) {
	c := a.opts.Cache
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, o := range objs {
			ref := health.RefOf(o)
			m, err := a.mapping(ref)
			if err != nil {
				return false, err
			}
			inf := c.informer(m.Resource)
			if inf == nil {
				return false, nil
			}
			item, ok, _ := inf.GetStore().GetByKey(ref.Namespace + "/" + ref.Name)
			c.mu.Lock()
			last := c.last[keyOf(ref)]
			c.mu.Unlock()
			if !ok || item.(*metav1.PartialObjectMetadata).ResourceVersion != last.resourceVersion {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("cache did not catch up: %v", err)
	}
}

// benchRaw is the limit: concurrent SSA patches, 64 writers, no client
// rate limit, nothing else.
func benchRaw(b *testing.B, n int) {
	cfg, requests := countingConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	a, err := New(cfg, Options{QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var elapsed time.Duration
	requests.Store(0)
	for range b.N {
		b.StopTimer()
		objs := benchObjects(cp.Namespace(b), n)
		bodies := make([][]byte, n)
		paths := make([]string, n)
		for i, o := range objs {
			bodies[i], _ = json.Marshal(o.Object)
			m, err := a.mapping(health.RefOf(o))
			if err != nil {
				b.Fatal(err)
			}
			paths[i] = objectPath(m, health.RefOf(o))
		}
		requests.Store(0)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Value
		next := atomic.Int64{}
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					err := a.rest.Patch(types.ApplyPatchType).AbsPath(paths[i]).
						Param("fieldManager", "raw").Param("force", "true").
						Body(bodies[i]).Do(context.Background()).Error()
					if err != nil {
						failed.Store(err)
					}
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
	}
	report(b, n, elapsed, requests.Load())
}

func benchKubectl(b *testing.B, n int) {
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, cp.Config); err != nil {
		b.Fatal(err)
	}
	objs := benchObjects(cp.Namespace(b), n)
	manifest := filepath.Join(dir, "set.yaml")
	f, err := os.Create(manifest)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		data, _ := yaml.Marshal(o.Object)
		fmt.Fprintf(f, "---\n%s", data)
	}
	f.Close()
	run := func() time.Duration {
		start := time.Now()
		cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", manifest)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("kubectl: %v\n%s", err, lastLines(out))
		}
		return time.Since(start)
	}
	b.ResetTimer()
	first := run()
	noop := run()
	b.StopTimer()
	b.ReportMetric(float64(n)/first.Seconds(), "objects/s")
	b.ReportMetric(first.Seconds(), "s/apply")
	b.ReportMetric(noop.Seconds(), "s/noop-apply")
}

func lastLines(out []byte) []byte {
	if len(out) > 2000 {
		return out[len(out)-2000:]
	}
	return out
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	user := map[string]any{}
	if len(cfg.CertData) > 0 {
		user["client-certificate-data"] = base64.StdEncoding.EncodeToString(cfg.CertData)
		user["client-key-data"] = base64.StdEncoding.EncodeToString(cfg.KeyData)
	}
	if cfg.CertFile != "" {
		user["client-certificate"], user["client-key"] = cfg.CertFile, cfg.KeyFile
	}
	if cfg.BearerToken != "" {
		user["token"] = cfg.BearerToken
	}
	cluster := map[string]any{"server": cfg.Host}
	if len(cfg.CAData) > 0 {
		cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(cfg.CAData)
	}
	if cfg.CAFile != "" {
		cluster["certificate-authority"] = cfg.CAFile
	}
	kc := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "envtest", "cluster": cluster}},
		"users":           []any{map[string]any{"name": "admin", "user": user}},
		"contexts":        []any{map[string]any{"name": "envtest", "context": map[string]any{"cluster": "envtest", "user": "admin"}}},
		"current-context": "envtest",
	}
	data, err := yaml.Marshal(kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

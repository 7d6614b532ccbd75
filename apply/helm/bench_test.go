package helm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// benchReleases is how many releases each benchmark installs.
const benchReleases = 100

// BenchmarkInstall installs benchReleases small releases (a ConfigMap and a
// Deployment each) with Wait=none: envtest runs no controllers, so a
// Deployment never becomes Available. It reports releases/s and the heap
// the Manager retains per release installed.
func BenchmarkInstall(b *testing.B) {
	chart := helm.Chart{Path: chartTgz(b, "demo")}
	deploy := []map[string]any{values("deployment", true)}
	for _, c := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("raw/c=%d", c), func(b *testing.B) {
			benchInstall(b, c, helm.Spec{Chart: chart, Values: deploy, Wait: helm.WaitNone})
		})
	}
}

// BenchmarkInstallWaited installs ConfigMap-only releases and waits for
// them with kstatus (Helm's watcher), the figure a real reconcile costs.
func BenchmarkInstallWaited(b *testing.B) {
	chart := helm.Chart{Path: chartTgz(b, "demo")}
	for _, c := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("kstatus/c=%d", c), func(b *testing.B) {
			benchInstall(b, c, helm.Spec{Chart: chart})
		})
	}
}

func benchInstall(b *testing.B, concurrency int, spec helm.Spec) {
	ctx := context.Background()
	var total time.Duration
	var retained int64
	var allocated uint64
	for i := 0; i < b.N; i++ {
		ns := cp.Namespace(b)
		before := heapInUse()
		allocBefore := totalAlloc()
		m := newManager(b, helm.Options{})
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, benchReleases)
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n := next.Add(1) - 1
					if n >= benchReleases {
						return
					}
					rel := helm.Release{Name: fmt.Sprintf("r%03d", n), Namespace: ns}
					if _, err := m.Install(ctx, rel, helm.InstallOptions{Spec: spec}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		total += time.Since(start)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		allocated += totalAlloc() - allocBefore
		retained += heapInUse() - before
		runtime.KeepAlive(m)
	}
	b.ReportMetric(float64(benchReleases*b.N)/total.Seconds(), "releases/s")
	b.ReportMetric(float64(retained)/float64(benchReleases*b.N), "heap-B/release")
	b.ReportMetric(float64(allocated)/float64(benchReleases*b.N), "alloc-B/release")
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// BenchmarkHelmCLI installs the same releases one after another with the
// helm v4 CLI against the same API server: raw (no wait, ConfigMap and
// Deployment) and waited (--wait=watcher, ConfigMap only). It is skipped
// when no helm binary is found ($HELM_BIN, $PATH, $(go env GOPATH)/bin).
func BenchmarkHelmCLI(b *testing.B) {
	bin := helmBinary()
	if bin == "" {
		b.Skip("no helm binary: go install helm.sh/helm/v4/cmd/helm@v4.3.1")
	}
	dir := b.TempDir()
	kubeconfig := writeKubeconfig(b, dir)
	chart := chartTgz(b, "demo")
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"raw", []string{"--set", "deployment=true"}},
		{"watcher", []string{"--wait=watcher", "--timeout=1m"}},
	} {
		b.Run(mode.name+"/sequential", func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				ns := cp.Namespace(b)
				start := time.Now()
				for n := range benchReleases {
					args := append([]string{"install", fmt.Sprintf("r%03d", n), chart, "--namespace", ns, "--kubeconfig", kubeconfig}, mode.args...)
					cmd := exec.Command(bin, args...)
					cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+dir, "HELM_CACHE_HOME="+dir, "HELM_DATA_HOME="+dir)
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("helm %v: %v\n%s", args, err, out)
					}
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(benchReleases*b.N)/total.Seconds(), "releases/s")
		})
	}
}

func helmBinary() string {
	if p := os.Getenv("HELM_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(string(out[:len(out)-1]), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// writeKubeconfig writes cp.Config as a kubeconfig for the CLI.
func writeKubeconfig(b *testing.B, dir string) string {
	c := cp.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	p := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		b.Fatal(err)
	}
	return p
}

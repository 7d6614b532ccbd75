package hostile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/demo"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// goodReleases is the size of the well-behaved tenant.
const goodReleases = 100

// secrets are the credentials the hostile tenant plants; none may reach
// anything the tenant can read.
var secrets = []string{"S3CR3T-IN-URL", "S3CR3T-IN-SECRET", "KC-TOKEN-S3CR3T"}

// registryHost is the registry both tenants' charts come from.
var registryHost string

// remoteAddr stands for a remote cluster's address the operator allows
// (--destination-allow): nothing listens there.
const remoteAddr = "127.0.0.2"

// TestHostileTenant runs cozy-aio twice on a fresh control plane: once with
// the well-behaved tenant alone, once beside the hostile tenant; then
// compares them.
func TestHostileTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("TestHostileTenant: two cozy-aio runs of 100 releases; skipped with -short")
	}
	bin := cozyBinary(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.PushChart(context.Background(), "charts/app", appChart); err != nil {
		t.Fatal(err)
	}
	registryHost = reg.Host()
	bomb := releaseBomb(t, 500<<20)
	baseline := runOnce(t, bin, reg.Host(), nil)
	hostile := runOnce(t, bin, reg.Host(), func(ctx context.Context, r *run) func() { return plantAttacks(ctx, t, r, bomb) })
	const mb = 1 << 20
	t.Logf("well-behaved tenant (%d releases) alone:          all Ready in %5.1f s, cozy-aio peak RSS %4d MB",
		goodReleases, baseline.ready.Seconds(), baseline.rss/mb)
	t.Logf("beside the hostile tenant (%d attacks):          all Ready in %5.1f s, cozy-aio peak RSS %4d MB",
		attackCount, hostile.ready.Seconds(), hostile.rss/mb)
	if hostile.rss > baseline.rss+50*mb {
		t.Errorf("peak RSS %d MB beside the hostile tenant, over %d MB + 50 MB alone", hostile.rss/mb, baseline.rss/mb)
	}
	// ±20 %, with 2 s of slack for a run of a few seconds on a shared
	// machine, where one scheduling hiccup is already 20 %.
	if lim := baseline.ready*12/10 + 2*time.Second; hostile.ready > lim {
		t.Errorf("the well-behaved tenant took %s beside the hostile tenant, over %s (alone: %s, +20 %% +2 s)",
			hostile.ready.Round(100*time.Millisecond), lim.Round(100*time.Millisecond), baseline.ready.Round(100*time.Millisecond))
	}
}

// result is one run's figures.
type result struct {
	ready time.Duration
	rss   int64
}

// run is one cozy-aio process with its control plane.
type run struct {
	cp   *testenv.ControlPlane
	c    client.Client
	proc *demo.Process
	logs string
}

// runOnce starts a control plane and cozy-aio, creates the well-behaved
// tenant (and whatever plant creates first; the function it returns runs
// the checks once the tenant is Ready), and returns the figures.
func runOnce(t *testing.T, bin, registry string, plant func(context.Context, *run) func()) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := start(ctx, t, bin)
	defer r.stop()
	var check func()
	if plant != nil {
		check = plant(ctx, r)
	}
	begin := time.Now()
	createGoodTenant(ctx, t, r.c, registry)
	if err := waitAllReady(ctx, r.c, "good", goodReleases); err != nil {
		t.Fatalf("%v (log: %s)", err, r.proc.Log())
	}
	ready := time.Since(begin)
	if check != nil {
		check()
	}
	rss, _ := r.proc.Usage()
	return result{ready: ready, rss: rss}
}

func start(ctx context.Context, t *testing.T, bin string) *run {
	t.Helper()
	work := t.TempDir()
	r := &run{logs: filepath.Join(work, "logs")}
	if err := os.MkdirAll(r.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{Scheme: engine.NewScheme(), LogDir: r.logs, StartTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r.cp, r.c = cp, cp.Client
	if err := engine.InstallCRDs(ctx, cp.Config, ""); err != nil {
		r.stop()
		t.Fatal(err)
	}
	kc, err := cp.Kubeconfig("cozy-aio", "system:masters")
	if err != nil {
		r.stop()
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		r.stop()
		t.Fatal(err)
	}
	// The default destination policy, with one exception a reader sees:
	// remoteAddr stands for a remote cluster's address.
	r.proc, err = demo.NewProcess(demo.ProcessOptions{
		Binary: bin, WorkDir: work, Logs: r.logs, ID: "hostile", Server: cp.Config.Host, Kubeconfig: kubeconfig,
		Health: freePort(t), Shards: 2, Workers: 4,
		Extra: []string{"--network-phase=false", "--destination-allow=" + remoteAddr + "/32"},
	})
	if err == nil {
		err = r.proc.Start()
	}
	if err != nil {
		r.stop()
		t.Fatal(err)
	}
	return r
}

func (r *run) stop() {
	if r.proc != nil {
		r.proc.Stop(20 * time.Second)
	}
	if r.cp != nil {
		_ = r.cp.Stop()
	}
}

var appChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 1.0.0\n",
	"values.yaml": "color: blue\n",
	"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
`,
}

func chartSource(ns, registry string) *sourcev1.OCIRepository {
	return &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + registry + "/charts/app", Insecure: true,
			Interval:      &metav1.Duration{Duration: time.Hour},
			Reference:     &sourcev1.OCIRepositoryRef{Tag: "1.0.0"},
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: "copy"},
		},
	}
}

func release(ns, name string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "app"},
		},
	}
}

func createGoodTenant(ctx context.Context, t *testing.T, c client.Client, registry string) {
	t.Helper()
	create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "good"}}, chartSource("good", registry))
	for i := range goodReleases {
		create(ctx, t, c, release("good", fmt.Sprintf("app-%03d", i)))
	}
}

func create(ctx context.Context, t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitAllReady waits until n HelmReleases of ns are Ready=True.
func waitAllReady(ctx context.Context, c client.Client, ns string, n int) error {
	for {
		var list helmv2.HelmReleaseList
		ready := 0
		if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
			for i := range list.Items {
				if conditions.IsReady(&list.Items[i]) {
					ready++
				}
			}
		}
		if ready == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d HelmReleases in %s Ready when the wait ended", ready, n, ns)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cozyBinary is $COZY_AIO_BINARY, else the binary built for this test.
func cozyBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("COZY_AIO_BINARY"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "cozy-aio")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/cozystack/cozy-aio/cmd/cozy-aio").CombinedOutput()
	if err != nil {
		t.Fatalf("building cozy-aio: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// counter is a listener on an address the policy refuses; it counts the
// connections that reach it, which must stay none.
type counter struct {
	ln net.Listener
	n  atomic.Int64
}

func listen(t *testing.T, addr string) *counter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *counter) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

// releaseBomb is a Helm release record (base64 of gzip of JSON, Helm's
// storage format) that inflates to size bytes.
func releaseBomb(t *testing.T, size int) []byte {
	t.Helper()
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = io.WriteString(w, `{"name":"bomb","namespace":"hostile","version":1,"info":{"status":"deployed"},"manifest":"`)
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	for range size >> 20 {
		_, _ = w.Write(chunk)
	}
	_, _ = io.WriteString(w, `"}`)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
}

// scrape returns cozy-aio's /metrics exposition.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metric returns the value of an unlabelled gauge from cozy-aio's /metrics.
func metric(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, fmt.Errorf("%s not in /metrics", name)
}

// readable is what cozy-aio wrote that the tenant of ns can read: the
// status of its Flux objects and its Events, as JSON. (The spec is the
// tenant's own writing: a credential it put in a URL is there by its
// hand.)
func readable(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	var b strings.Builder
	for _, l := range []client.ObjectList{&helmv2.HelmReleaseList{}, &sourcev1.GitRepositoryList{}, &sourcev1.OCIRepositoryList{},
		&sourcev1.HelmRepositoryList{}, &sourcev1.HelmChartList{}} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
		if err != nil {
			t.Fatal(err)
		}
		items, _ := u["items"].([]any)
		for _, it := range items {
			j, _ := json.Marshal(it.(map[string]any)["status"])
			b.Write(j)
		}
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		fmt.Fprintf(&b, "%s %s %v\n", e.Reason, e.Message, e.Annotations)
	}
	return b.String()
}

// eventually polls cond until it holds or the time is up.
func eventually(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return cond()
}

// readyFalse returns obj's Ready message once Ready is False.
func readyFalse(ctx context.Context, c client.Client, obj client.Object) (string, bool) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return "", false
	}
	getter, ok := obj.(conditions.Getter)
	if !ok {
		return "", false
	}
	r := conditions.Get(getter, meta.ReadyCondition)
	if r == nil || r.Status != metav1.ConditionFalse {
		return "", false
	}
	return r.Message, true
}

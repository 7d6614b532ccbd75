package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

const slowChartDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec:
      containers: [{name: app, image: example/app:1}]
`

// TestSIGTERMDuringHelmInstallIsRecovered stops the binary with SIGTERM
// while a Helm install waits for its Deployment, restarts it, and checks
// that the release ends deployed with no revision stuck in pending-*.
func TestSIGTERMDuringHelmInstallIsRecovered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, bin, kubeconfig, host, c := slowChartEnv(t)
	ns := cp.Namespace(t)
	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--kubeprism-address", freePort(t),
			"--data-dir", filepath.Join(dir, "data"), "--artifact-addr", freePort(t), "--health-addr", freePort(t),
			"--holder-id", "node-1", "--log-format", "text", "--network-phase=false")
		cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &logs
	}
	first, logs := start()
	defer first.Process.Kill()

	hr, objs := slowRelease(ns, host)
	eventually(t, "the CRDs are installed and the objects created", func() bool {
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil && client.IgnoreAlreadyExists(err) != nil {
				return false
			}
		}
		return true
	}, logs)
	statuses := func() []string {
		var secrets corev1.SecretList
		_ = c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "slow"})
		var out []string
		for _, s := range secrets.Items {
			out = append(out, s.Labels["status"])
		}
		return out
	}
	eventually(t, "the install is pending (waiting for the Deployment)", func() bool {
		if strings.Contains(strings.Join(statuses(), ","), "pending-install") {
			return true
		}
		_ = c.Get(ctx, client.ObjectKeyFromObject(hr), hr)
		t.Logf("revisions %v, HelmRelease conditions %v", statuses(), hr.Status.Conditions)
		return false
	}, logs)

	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	select {
	case <-exited: // a non-zero exit is fine: the install was cut short on purpose
	case <-time.After(90 * time.Second):
		t.Fatalf("no exit within 90s of SIGTERM; logs:\n%s", logs.String())
	}
	t.Logf("after SIGTERM the release revisions are %v", statuses())

	// The restarted process finds its dead incarnation's release and
	// recovers it; this time the Deployment becomes Available.
	second, logs2 := start()
	defer second.Process.Kill()
	available, stopAvailable := context.WithCancel(ctx)
	defer stopAvailable()
	go testenv.MakeDeploymentsAvailable(available, c, ns)
	eventually(t, "the HelmRelease becomes Ready after the restart", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(hr), hr) == nil && conditions.IsReady(hr)
	}, logs2)
	for _, s := range statuses() {
		if strings.HasPrefix(s, "pending") {
			t.Fatalf("a revision is still %s after recovery: %v", s, statuses())
		}
	}
	if !strings.Contains(strings.Join(statuses(), ","), "deployed") {
		t.Fatalf("no deployed revision: %v", statuses())
	}
	_ = second.Process.Signal(syscall.SIGTERM)
	_ = second.Wait()
}

func eventually(t *testing.T, what string, cond func() bool, logs *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened; logs:\n%s", what, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// slowChartEnv builds the binary and starts a registry holding the slow
// chart (a Deployment that is Available only when a test says so); it
// returns the test's directory, the binary, an admin kubeconfig, the
// registry's host and a client.
func slowChartEnv(t *testing.T) (dir, bin, kubeconfig, host string, c client.Client) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "cozy-aio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	kubeconfig = writeKubeconfig(t, dir)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if _, err := reg.PushChart(context.Background(), "charts/slow", map[string]string{
		"Chart.yaml":                "apiVersion: v2\nname: slow\nversion: 1.0.0\n",
		"templates/deployment.yaml": slowChartDeployment,
	}); err != nil {
		t.Fatal(err)
	}
	if c, err = client.New(cp.Config, client.Options{Scheme: engine.NewScheme()}); err != nil {
		t.Fatal(err)
	}
	return dir, bin, kubeconfig, reg.Host(), c
}

// slowRelease is a HelmRelease of the slow chart in ns, with a long
// install timeout, and the objects to create for it (its source and it).
func slowRelease(ns, host string) (*helmv2.HelmRelease, []client.Object) {
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "slow"},
			Install:  &helmv2.Install{Timeout: &metav1.Duration{Duration: 10 * time.Minute}},
		},
	}
	return hr, []client.Object{&sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + host + "/charts/slow", Insecure: true,
			Interval:      &metav1.Duration{Duration: time.Hour},
			Reference:     &sourcev1.OCIRepositoryRef{Tag: "1.0.0"},
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: "copy"},
		},
	}, hr}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &cp, testenv.ControlPlaneOptions{}))
}

func TestVersionAndStaticPod(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != "dev" {
		t.Fatalf("version: code %d out %q err %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"static-pod", "--image", "example/cozy:1", "--health-port", "9555"}, &out, &errb); code != 0 {
		t.Fatalf("static-pod: %s", errb.String())
	}
	for _, want := range []string{"image: example/cozy:1", "hostNetwork: true", "port: 9555", "system-node-critical"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("static-pod output lacks %q", want)
		}
	}
	if code := run([]string{"frobnicate"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("an unknown command must fail clearly: %q", errb.String())
	}
	if code := run([]string{"run", "--shards", "zero"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "--shards") {
		t.Fatalf("a bad --shards must fail clearly: %q", errb.String())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRunServesProbesAndStopsOnSIGTERM runs the real binary against the
// API server, reads its probes and metrics, and stops it with SIGTERM.
func TestRunServesProbesAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "cozy-aio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	kubeconfig := writeKubeconfig(t, dir)
	health := freePort(t)
	cmd := exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--kubeprism-address", freePort(t),
		"--data-dir", filepath.Join(dir, "data"), "--artifact-addr", freePort(t), "--log-format", "text")
	cmd.Env = append(os.Environ(), "COZY_AIO_HEALTH_ADDR="+health, "KUBERNETES_SERVICE_HOST=")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if code, body := get("/readyz"); code == http.StatusOK && strings.Contains(body, "phase:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered with the phase; logs:\n%s", logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	code, metrics := get("/metrics")
	if code != http.StatusOK || !strings.Contains(metrics, "cozy_aio_bootstrap_phase") || !strings.Contains(metrics, "workqueue_") {
		t.Fatalf("/metrics: %d, lacks the phase or workqueue metrics:\n%.2000s", code, metrics)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; logs:\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("no exit within 60s of SIGTERM; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "API server found") {
		t.Fatalf("the chosen API server should be logged:\n%s", logs.String())
	}
	fmt.Fprint(io.Discard, logs.String())
}

// writeKubeconfig writes an admin kubeconfig for the test API server.
func writeKubeconfig(t testing.TB, dir string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.Config.CertData, ClientKeyData: cp.Config.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

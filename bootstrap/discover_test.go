package bootstrap_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cozystack/cozy-aio/bootstrap"
)

// deadAddress returns a loopback address on which nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// writeKubeconfig writes a kubeconfig that trusts srv's certificate.
func writeKubeconfig(t *testing.T, server string, srv *httptest.Server) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	if srv != nil {
		cluster.CertificateAuthorityData = pemCert(srv)
	}
	cfg.Clusters["c"] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.Token = "t0ken"
	cfg.AuthInfos["u"] = user
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDiscoverPrefersLiveKubePrismOverDeadServiceEnv(t *testing.T) {
	var sawToken string
	prism := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawToken = r.Header.Get("Authorization")
		w.Write([]byte(`{"gitVersion":"v1.37.1"}`))
	}))
	defer prism.Close()
	dead := deadAddress(t)
	host, port, _ := net.SplitHostPort(dead)
	env := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}

	ep, err := bootstrap.Discover(testContext(t), bootstrap.DiscoverOptions{
		Kubeconfig:       writeKubeconfig(t, "https://"+deadAddress(t), prism),
		KubePrismAddress: strings.TrimPrefix(prism.URL, "https://"),
		LocalAddress:     deadAddress(t),
		Getenv:           func(k string) string { return env[k] },
		ProbeTimeout:     time.Second,
	})
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	if ep.Kind != bootstrap.CandidateKubePrism || ep.Config.Host != prism.URL {
		t.Fatalf("chose %s %s, want kubeprism %s", ep.Kind, ep.Config.Host, prism.URL)
	}
	if len(ep.Attempts) != 2 || ep.Attempts[0].Kind != bootstrap.CandidateEnv || ep.Attempts[0].Err == nil {
		t.Fatalf("attempts = %v, want the dead service env first, then kubeprism", ep.Attempts)
	}
	if sawToken != "Bearer t0ken" {
		t.Fatalf("probe sent Authorization %q, want the kubeconfig's token", sawToken)
	}
}

func TestDiscoverWithNothingReachableListsEveryCandidate(t *testing.T) {
	kubeconfigServer := "https://" + deadAddress(t)
	_, err := bootstrap.Discover(testContext(t), bootstrap.DiscoverOptions{
		Server:           "https://" + deadAddress(t),
		Kubeconfig:       writeKubeconfig(t, kubeconfigServer, nil),
		KubePrismAddress: deadAddress(t),
		LocalAddress:     deadAddress(t),
		Getenv: func(k string) string {
			return map[string]string{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}[k]
		},
		Fallbacks:    []string{"https://" + deadAddress(t)},
		ProbeTimeout: 500 * time.Millisecond,
	})
	var de *bootstrap.DiscoveryError
	if !errors.As(err, &de) || !errors.Is(err, bootstrap.ErrNoAPIServer) {
		t.Fatalf("want a DiscoveryError, got %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("the error must be one line: %q", msg)
	}
	for _, kind := range bootstrap.DefaultOrder {
		if !strings.Contains(msg, kind+" https://") {
			t.Errorf("error does not name candidate %s: %s", kind, msg)
		}
	}
	if !strings.Contains(msg, kubeconfigServer) {
		t.Errorf("error does not name the kubeconfig's server: %s", msg)
	}
}

func TestDiscoverWithoutCredentialsSaysSo(t *testing.T) {
	_, err := bootstrap.Discover(testContext(t), bootstrap.DiscoverOptions{
		ServiceAccountDir: t.TempDir(),
		Getenv:            func(string) string { return "" },
		KubePrismAddress:  deadAddress(t),
		LocalAddress:      deadAddress(t),
	})
	if _, statErr := os.Stat("/etc/kubernetes/admin.conf"); statErr == nil {
		t.Log("this machine has /etc/kubernetes/admin.conf; credentials come from it")
		return
	}
	if err == nil || !strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("want an error about missing credentials, got %v", err)
	}
}

func TestDiscoverFindsTheRealAPIServer(t *testing.T) {
	cfg := cp.Config
	c := clientcmdapi.NewCluster()
	c.Server = cfg.Host
	c.CertificateAuthorityData = cfg.CAData
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = c
	u := clientcmdapi.NewAuthInfo()
	u.ClientCertificateData, u.ClientKeyData = cfg.CertData, cfg.KeyData
	kc.AuthInfos["admin"] = u
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	ep, err := bootstrap.Discover(testContext(t), bootstrap.DiscoverOptions{
		Kubeconfig:       path,
		Getenv:           func(string) string { return "" },
		KubePrismAddress: deadAddress(t),
		LocalAddress:     deadAddress(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Kind != bootstrap.CandidateKubeconfig {
		t.Fatalf("chose %s, want kubeconfig", ep.Kind)
	}
}

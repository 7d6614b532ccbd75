package helm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/oci"
)

// TestLoadChartThroughTheOCIClient pulls a chart from a registry that asks
// for credentials, behind a TLS front with a self-signed certificate: the
// chart's Registry settings reach source/oci's client.
func TestLoadChartThroughTheOCIClient(t *testing.T) {
	ctx := context.Background()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{Username: "flux", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	manifest, err := reg.PushChart(ctx, "charts/demo", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 0.1.0+build\n", "templates/cm.yaml": "kind: ConfigMap\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("http://" + reg.Host())
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	host := strings.TrimPrefix(front.URL, "https://")

	m := &Manager{charts: boundedCache[[]byte]{max: 4}, parsed: boundedCache[*chartv2.Chart]{max: 4}}
	c := Chart{Ref: "oci://" + host + "/charts/demo", Version: "0.1.0+build"}
	if _, _, err := m.loadChart(ctx, c); !errors.Is(err, source.ErrUnreachable) {
		t.Fatalf("self-signed without a TLS config: got %v, want ErrUnreachable", err)
	}
	c.Registry.TLSConfig = front.Client().Transport.(*http.Transport).TLSClientConfig
	if _, _, err := m.loadChart(ctx, c); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("without credentials: got %v, want ErrAuth", err)
	}
	for _, r := range []oci.Registry{
		{TLSConfig: c.Registry.TLSConfig, DockerConfigJSON: []byte(`{"auths":{"` + host + `":{"username":"flux","password":"s3cret"}}}`)},
		{TLSConfig: c.Registry.TLSConfig, Username: "flux", Password: "s3cret"},
	} {
		c.Registry = r
		ch, digest, err := m.loadChart(ctx, c)
		if err != nil || ch.Name() != "demo" || digest != manifest.Digest.String() {
			t.Fatalf("with credentials: %v, digest %s, want %s", err, digest, manifest.Digest)
		}
	}
	c.Ref, c.Version = "oci://"+host+"/charts/demo@"+manifest.Digest.String(), ""
	if _, digest, err := m.loadChart(ctx, c); err != nil || digest != manifest.Digest.String() {
		t.Fatalf("by digest: %v, digest %s", err, digest)
	}
}

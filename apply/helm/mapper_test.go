package helm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// A release whose chart uses a kind that another release (or anyone)
// installs later installs once the kind is served, with the same Manager:
// its discovery cache, which had already read the server without the
// kind, is refreshed on "no matches for kind", as helm-controller, which
// builds a fresh REST mapper for every reconcile, sees the kind at once.
func TestReleaseSeesAKindInstalledAfterItsClusterWasDiscovered(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	b, err := testenv.TarGz(map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: user\nversion: 0.1.0\n",
		"templates/widget.yaml": "apiVersion: late.cozy-aio.io/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 1\n",
	}, "user/")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user.tgz")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	rel := helm.Release{Name: "user", Namespace: ns}
	install := func() error {
		_, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: helm.Chart{Path: path}}})
		return err
	}
	// Before the CRD: the kind is unknown, and the Manager has now read
	// the server's discovery.
	if err := install(); err == nil || !strings.Contains(err.Error(), "no matches for kind") {
		t.Fatalf("install before the CRD: %v, want no matches for kind", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.late.cozy-aio.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "late.cozy-aio.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true)}}}},
		},
	}
	if err := cp.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, crd) })
	// Wait until the API server's discovery serves the kind.
	dc := discovery.NewDiscoveryClientForConfigOrDie(cp.Config)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := dc.ServerResourcesForGroupVersion("late.cozy-aio.io/v1"); err == nil && len(res.APIResources) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server never served widgets.late.cozy-aio.io")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The refresh is rate-limited to once a second per cluster: the
	// install may need one retry, as a HelmRelease's next attempt.
	var last error
	for range 10 {
		if last = install(); last == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("install after the CRD is served: %v", last)
}

func ptrTo[T any](v T) *T { return &v }

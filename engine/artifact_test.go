package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// A HelmRelease or a Kustomization whose source does not exist yet is
// Ready=False (ArtifactFailed) and installs once the source appears, with
// no Warning Event in between: helm-controller and kustomize-controller
// record none for a missing source (Cozystack's operator creates an
// ArtifactGenerator and the HelmReleases of its ExternalArtifacts at once).
func TestMissingSourceRecordsNoWarningOnItsUsers(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	if _, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": configMap("cm", ns)}, nil); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	hr := helmRelease(ns, "app", "demo")
	ks := kustomization(ns, "apps", "manifests", "./")
	ks.Spec.SourceRef.Kind = sourcev1.OCIRepositoryKind
	create(t, hr, ks)
	notFound := func(obj conditions.Getter) func() bool {
		return func() bool {
			c := conditions.Get(obj, meta.ReadyCondition)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == meta.ArtifactFailedReason &&
				strings.Contains(c.Message, "not found")
		}
	}
	waitFor(t, hr, notFound(hr), "Ready=False: the source is not found")
	waitFor(t, ks, notFound(ks), "Ready=False: the source is not found")

	create(t, chartSource(ns, "demo", reg.Host(), "1.0.0"), &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "manifests", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + reg.Host() + "/manifests/app", Insecure: true,
			Interval:  &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
		},
	})
	waitFor(t, hr, readyIs(hr, true), "Ready=True once the source exists")
	waitFor(t, ks, readyIs(ks, true), "Ready=True once the source exists")

	var events corev1.EventList
	if err := cp.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		kind := e.InvolvedObject.Kind
		if (kind == helmv2.HelmReleaseKind || kind == kustomizev1.KustomizationKind) && e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning Event on %s/%s: %s: %s", kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

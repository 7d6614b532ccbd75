package engine_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

func TestArtifactGeneratorFeedsAHelmRelease(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"), demoChart("2.0.0"))
	startEngine(t, engine.Options{})
	// The chart layer is extracted (Flux's default), so the source holds demo/….
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	src.Spec.LayerSelector.Operation = "extract"
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-charts", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "chart", Kind: sourcev1.OCIRepositoryKind, Name: "demo"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name:     "tenant-a-demo",
				Revision: "@chart",
				Copy: []swv1beta1.CopyOperation{
					{From: "@chart/demo/**", To: "@artifact/"},
				},
			}},
		},
	}
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.ExternalArtifactKind, Name: "tenant-a-demo"},
		},
	}
	for _, o := range []client.Object{src, gen, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a-demo", Namespace: ns}}
	waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "ExternalArtifact with an artifact")
	if ea.Spec.SourceRef == nil || ea.Spec.SourceRef.Kind != swv1beta1.ArtifactGeneratorKind || ea.Spec.SourceRef.Name != "tenant-charts" {
		t.Fatalf("ExternalArtifact sourceRef = %+v, want the generator", ea.Spec.SourceRef)
	}
	first := ea.Status.Artifact.Revision
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	// As helm-controller: an ExternalArtifact's revision with a digest
	// goes into the chart version.
	if v, _, err := helm.ChartVersionWithDigest("1.0.0", first); err != nil || !exists(t, cm) || cm.Data["chart"] != v {
		t.Fatalf("installed ConfigMap = %v, want chart %s (%v)", cm.Data, v, err)
	}

	// A new source revision flows through the generator into an upgrade.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	src.Spec.Reference.Tag = "2.0.0"
	if err := cp.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && ea.Status.Artifact.Revision != first }, "a new ExternalArtifact revision")
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgrade")
	if v, _, err := helm.ChartVersionWithDigest("2.0.0", ea.Status.Artifact.Revision); err != nil || !exists(t, cm) || cm.Data["chart"] != v {
		t.Fatalf("after the upgrade the ConfigMap says %v, want chart %s (%v)", cm.Data, v, err)
	}
}

// An output's originRevision "@alias" sets the ExternalArtifact's
// org.opencontainers.image.revision to that source's own origin revision
// (its artifact's annotation of the same name), as source-watcher does.
func TestArtifactGeneratorOriginRevision(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	const origin = "main@sha1:8a2b5f2c0d1e4f6a7b8c9d0e1f2a3b4c5d6e7f80"
	if _, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": configMap("cm", ns)},
		map[string]string{swv1beta1.ArtifactOriginRevisionAnnotation: origin}); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	src := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + reg.Host() + "/manifests/app", Insecure: true,
			Interval:  &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
		},
	}
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "gen", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "app", Kind: sourcev1.OCIRepositoryKind, Name: "app"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{
				{Name: "with-origin", OriginRevision: "@app", Copy: []swv1beta1.CopyOperation{{From: "@app/**", To: "@artifact/"}}},
				{Name: "without-origin", Copy: []swv1beta1.CopyOperation{{From: "@app/**", To: "@artifact/"}}},
			},
		},
	}
	for _, o := range []client.Object{src, gen} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	with := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "with-origin", Namespace: ns}}
	waitFor(t, with, func() bool { return with.Status.Artifact != nil && conditions.IsReady(with) }, "an artifact")
	if got := with.Status.Artifact.Metadata[swv1beta1.ArtifactOriginRevisionAnnotation]; got != origin {
		t.Fatalf("origin revision = %q, want the source's %q", got, origin)
	}
	without := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "without-origin", Namespace: ns}}
	waitFor(t, without, func() bool { return without.Status.Artifact != nil && conditions.IsReady(without) }, "an artifact")
	if got, ok := without.Status.Artifact.Metadata[swv1beta1.ArtifactOriginRevisionAnnotation]; ok {
		t.Fatalf("an output without originRevision has origin revision %q", got)
	}
}

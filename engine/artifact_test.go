package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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

	noWarnings(t, ns, helmv2.HelmReleaseKind, kustomizev1.KustomizationKind)
}

// A Kustomization whose source's status another server wrote (Flux's
// source-controller before a switch), that server gone and cozy-aio's own
// archive of the revision another digest, waits for the source's
// reconciler here to replace the artifact: Ready=False with a message that
// says so, no Warning Event, and Ready once the source is reconciled.
func TestForeignArtifactIsWaitedForNotFailed(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	desc, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": configMap("cm", ns)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	// Suspended, so that its reconciler here leaves the status alone
	// until it is resumed.
	src := suspendedOCIRepository(ns, "manifests", "oci://"+reg.Host()+"/manifests/app")
	create(t, src)
	// The revision upstream has, archived by another server: the
	// digest is not that of cozy-aio's archive of it.
	foreignArtifact(t, src, "v1@"+desc.Digest.String(), "cd")
	ks := kustomization(ns, "apps", "manifests", "./")
	ks.Spec.SourceRef.Kind = sourcev1.OCIRepositoryKind
	create(t, ks)
	waitFor(t, ks, waitsForSource(ks, "made by another server"), "Ready=False, waiting for the source to be reconciled here")

	resume(t, src)
	waitFor(t, ks, readyIs(ks, true), "Ready=True once the source is reconciled here")
	noWarnings(t, ns, kustomizev1.KustomizationKind)
}

// The same one level down, as on a replica taking over from Flux: a
// HelmRelease whose ExternalArtifact must be rebuilt (its file is not
// here) while the generator's input is another server's artifact waits
// for that input's reconciler here, with no Warning Event, and installs
// once the input is reconciled and the generator has written its output.
func TestForeignInputOfARebuildIsWaitedFor(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t)
	files := map[string]string{}
	for p, c := range demoChart("1.0.0") {
		files["demo/"+p] = c
	}
	desc, err := reg.PushArtifact(ctx, "packages", "v1", files, nil)
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	src := suspendedOCIRepository(ns, "packages", "oci://"+reg.Host()+"/packages")
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "pkg", Kind: sourcev1.OCIRepositoryKind, Name: "packages"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name: "demo", Copy: []swv1beta1.CopyOperation{{From: "@pkg/demo/**", To: "@artifact/demo/"}},
			}},
		},
	}
	ea := &sourcev1.ExternalArtifact{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: sourcev1.ExternalArtifactSpec{SourceRef: &meta.NamespacedObjectKindReference{
			APIVersion: swv1beta1.GroupVersion.String(), Kind: swv1beta1.ArtifactGeneratorKind, Name: "charts"}},
	}
	create(t, src, ea)
	foreignArtifact(t, src, "v1@"+desc.Digest.String(), "cd")
	foreignArtifact(t, ea, "latest@sha256:"+strings.Repeat("ef", 32), "ef")
	create(t, gen)
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.ChartRef.Kind = sourcev1.ExternalArtifactKind
	create(t, hr)
	waitFor(t, hr, waitsForSource(hr, "waiting for the source to be reconciled here"), "Ready=False, waiting for the generator's input")

	resume(t, src)
	waitFor(t, hr, readyIs(hr, true), "Ready=True once the input is reconciled and the output written")
	noWarnings(t, ns, helmv2.HelmReleaseKind)
}

// suspendedOCIRepository is OCIRepository ns/name of tag v1 at url
// (plain HTTP), suspended, so that its reconciler here leaves its status
// alone until it is resumed.
func suspendedOCIRepository(ns, name, url string) *sourcev1.OCIRepository {
	return &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: url, Insecure: true, Suspend: true,
			Interval:  &metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
		},
	}
}

// foreignArtifact writes obj's status as another server left it: Ready,
// with an artifact of revision rev whose URL no server here serves and
// whose digest (hex repeated) is not that of cozy-aio's archive.
func foreignArtifact(t *testing.T, obj interface {
	client.Object
	conditions.Setter
}, rev, hex string) {
	t.Helper()
	file := strings.Repeat(hex, 32) + ".tar.gz"
	a := &meta.Artifact{Revision: rev, Digest: "sha256:" + strings.Repeat(hex, 32), LastUpdateTime: metav1.Now()}
	switch o := obj.(type) {
	case *sourcev1.OCIRepository:
		a.Path, o.Status.Artifact = "ocirepository/"+o.Namespace+"/"+o.Name+"/"+file, a
	case *sourcev1.ExternalArtifact:
		a.Path, o.Status.Artifact = "externalartifact/"+o.Namespace+"/"+o.Name+"/"+file, a
	default:
		t.Fatalf("foreignArtifact: %T", obj)
	}
	a.URL = "http://127.0.0.1:1/" + a.Path
	conditions.MarkTrue(obj, meta.ReadyCondition, meta.SucceededReason, "stored artifact for revision '%s'", rev)
	if err := cp.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitsForSource tells whether obj is Ready=False ArtifactFailed saying
// says, as a consumer waiting for its source's reconciler here.
func waitsForSource(obj conditions.Getter, says string) func() bool {
	return func() bool {
		c := conditions.Get(obj, meta.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == meta.ArtifactFailedReason &&
			strings.Contains(c.Message, says) && strings.Contains(c.Message, "waiting")
	}
}

// resume sets spec.suspend of an OCIRepository to false.
func resume(t *testing.T, src *sourcev1.OCIRepository) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(src), src); err != nil {
			return err
		}
		src.Spec.Suspend = false
		return cp.Client.Update(context.Background(), src)
	}); err != nil {
		t.Fatal(err)
	}
}

// noWarnings fails the test for each Warning Event on an object of kind
// in ns.
func noWarnings(t *testing.T, ns string, kinds ...string) {
	t.Helper()
	var events corev1.EventList
	if err := cp.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if slices.Contains(kinds, e.InvolvedObject.Kind) && e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning Event on %s/%s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

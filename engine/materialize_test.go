package engine_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
)

// wipeStore empties the engine's data directory, as on a replica that has
// never run the source reconcilers or a node whose disk was replaced.
func wipeStore(t *testing.T, e *engine.Engine) {
	t.Helper()
	entries, err := os.ReadDir(e.Store().Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(e.Store().Root(), en.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// fileDigest returns the sha256 of the store's file at the artifact's path,
// or "" when there is none.
func fileDigest(e *engine.Engine, a *meta.Artifact) string {
	b, err := os.ReadFile(e.Store().Path(source.Artifact{Path: a.Path}))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

type artifactHolder interface {
	client.Object
	GetArtifact() *meta.Artifact
}

// TestMaterializeRebuildsWipedArtifacts lets an engine build the artifacts
// of a GitRepository (with ignore rules), an OCIRepository and an
// ArtifactGenerator, empties its store, and then starts dependents: each
// artifact comes back, rebuilt from upstream, byte for byte the one status
// names, while the sources' status stays untouched (no reconciler rebuilt
// them).
func TestMaterializeRebuildsWipedArtifacts(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSrv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer gitSrv.Close()
	repo, err := gitSrv.Repo("platform.git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit("main", map[string]string{
		"cm/cm.yaml": configMap("from-git", ns), "cm/notes.md": "ignored by spec.ignore\n",
		"cm/skip/x.yaml": "ignored by .sourceignore\n", ".sourceignore": "cm/skip/\n", "run.sh": "#!/bin/sh\n",
	}, "one"); err != nil {
		t.Fatal(err)
	}
	reg := chartRegistry(t, demoChart("1.0.0"))
	if _, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": configMap("from-oci", ns)}, nil); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, engine.Options{})

	ignore := "*.md\n"
	gr := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: ns},
		Spec: sourcev1.GitRepositorySpec{
			URL: repo.URL(), Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"}, Ignore: &ignore,
		},
	}
	manifests := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "manifests", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + reg.Host() + "/manifests/app", Insecure: true,
			Interval: &metav1.Duration{Duration: time.Hour}, Reference: &sourcev1.OCIRepositoryRef{Tag: "v1"},
		},
	}
	chart := chartSource(ns, "demo", reg.Host(), "1.0.0")
	chart.Spec.LayerSelector.Operation = "extract"
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-charts", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "chart", Kind: sourcev1.OCIRepositoryKind, Name: "demo"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name: "tenant-a-demo", Revision: "@chart",
				Copy: []swv1beta1.CopyOperation{{From: "@chart/demo/**", To: "@artifact/"}},
			}},
		},
	}
	for _, o := range []client.Object{gr, manifests, chart, gen} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a-demo", Namespace: ns}}
	waitFor(t, gr, readyIs(gr, true), "Ready=True")
	waitFor(t, manifests, readyIs(manifests, true), "Ready=True")
	waitFor(t, chart, readyIs(chart, true), "Ready=True")
	waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "an artifact")
	sources := []artifactHolder{gr, manifests, chart, ea}
	built := map[string]meta.Artifact{}
	for _, s := range sources {
		built[s.GetName()] = *s.GetArtifact().DeepCopy()
	}
	// main moves on: the artifact's commit is now only in the history.
	if _, err := repo.Commit("main", map[string]string{"cm/cm.yaml": configMap("later", ns)}, "two"); err != nil {
		t.Fatal(err)
	}

	wipeStore(t, e)
	fromGit := kustomization(ns, "from-git", "platform", "./cm")
	fromOCI := kustomization(ns, "from-oci", "manifests", "./")
	fromOCI.Spec.SourceRef.Kind = sourcev1.OCIRepositoryKind
	hr := helmRelease(ns, "app", "tenant-a-demo")
	hr.Spec.ChartRef.Kind = sourcev1.ExternalArtifactKind
	for _, o := range []client.Object{fromGit, fromOCI, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, fromGit, readyIs(fromGit, true), "Ready=True")
	waitFor(t, fromOCI, readyIs(fromOCI, true), "Ready=True")
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	for _, name := range []string{"from-git", "from-oci", "app-settings"} {
		if cm := (&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); !exists(t, cm) {
			t.Errorf("ConfigMap %s was not applied", name)
		}
	}
	if fromGit.Status.LastAppliedRevision != built["platform"].Revision {
		t.Errorf("applied %s, want the revision in status %s", fromGit.Status.LastAppliedRevision, built["platform"].Revision)
	}
	for _, s := range sources {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			t.Fatal(err)
		}
		want, got := built[s.GetName()], s.GetArtifact()
		if got.Digest != want.Digest || got.Revision != want.Revision || !got.LastUpdateTime.Equal(&want.LastUpdateTime) {
			t.Errorf("%s: status changed from %+v to %+v: a reconciler rebuilt it", s.GetName(), want, *got)
		}
		if d := fileDigest(e, got); d != want.Digest {
			t.Errorf("%s: the store holds %q at %s, want the status digest %s", s.GetName(), d, got.Path, want.Digest)
		}
	}
}

// TestHelmReleaseInstallsFromWipedChart installs a release whose chart
// artifact (an OCI layer copied as is) is not in the store.
func TestHelmReleaseInstallsFromWipedChart(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	e := startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	if err := cp.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, src, readyIs(src, true), "Ready=True")
	wipeStore(t, e)
	if fileDigest(e, src.Status.Artifact) != "" {
		t.Fatal("the chart is still in the store")
	}
	hr := helmRelease(ns, "app", "demo")
	if err := cp.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	// The chart version carries the OCI artifact's digest, as helm-controller installs it.
	if !exists(t, cm) || cm.Data["chart"] != sourceChartVersion(t, src, "1.0.0") {
		t.Fatalf("installed ConfigMap = %v", cm.Data)
	}
	if d := fileDigest(e, src.Status.Artifact); d != src.Status.Artifact.Digest {
		t.Fatalf("store holds %q, want %s", d, src.Status.Artifact.Digest)
	}
}

// tamper suspends a source, so that its reconciler leaves it alone, and
// writes a wrong digest in its status. It returns the real artifact.
func tamper(t *testing.T, obj artifactHolder, suspend func(bool), wrong string) *meta.Artifact {
	t.Helper()
	ctx := context.Background()
	real := obj.GetArtifact().DeepCopy()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	suspend(true)
	if err := cp.Client.Patch(ctx, obj, patch); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(obj.DeepCopyObject().(client.Object))
	obj.GetArtifact().Digest = wrong
	if err := cp.Client.Status().Patch(ctx, obj, patch); err != nil {
		t.Fatal(err)
	}
	return real
}

// TestMaterializeRefusesTamperedDigest gives suspended sources a status
// digest that their revision does not build to. A Kustomization whose
// source file is still in the store, and a HelmRelease whose chart was
// wiped (as on a replica), both fail naming the source and both digests;
// nothing that failed the check is stored; once the sources are resumed,
// their reconcilers replace the artifacts and the dependents recover.
func TestMaterializeRefusesTamperedDigest(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	_, gr := gitSource(t, ns, "platform", map[string]string{"cm.yaml": configMap("app", ns)})
	reg := chartRegistry(t, demoChart("1.0.0"))
	chart := chartSource(ns, "demo", reg.Host(), "1.0.0")
	if err := cp.Client.Create(ctx, chart); err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, engine.Options{})
	waitFor(t, gr, readyIs(gr, true), "Ready=True")
	waitFor(t, chart, readyIs(chart, true), "Ready=True")
	wrong := "sha256:" + strings.Repeat("0", 64)
	suspendGit := func(v bool) { gr.Spec.Suspend = v }
	suspendChart := func(v bool) { chart.Spec.Suspend = v }
	realGit := tamper(t, gr, suspendGit, wrong)

	ks := kustomization(ns, "app", "platform", "./")
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, false), "Ready=False")
	mismatch := func(obj conditions.Getter, src string, real *meta.Artifact) {
		t.Helper()
		msg := conditions.GetMessage(obj, meta.ReadyCondition)
		if !containsAll(msg, []string{src, wrong, real.Digest}) {
			t.Fatalf("message %q should name %s, the status digest %s and the rebuilt one %s", msg, src, wrong, real.Digest)
		}
		if r := conditions.GetReason(obj, meta.ReadyCondition); r != meta.ArtifactFailedReason || conditions.IsReconciling(obj) {
			t.Fatalf("reason %q, reconciling %v: a mismatch is a failure, not a wait", r, conditions.IsReconciling(obj))
		}
	}
	mismatch(ks, "GitRepository/"+ns+"/platform", realGit)
	entries, err := os.ReadDir(filepath.Dir(e.Store().Path(source.Artifact{Path: realGit.Path})))
	if err != nil || len(entries) != 1 || fileDigest(e, realGit) != realGit.Digest {
		t.Fatalf("the store should hold the one real artifact, untouched: %v %v", entries, err)
	}

	wipeStore(t, e)
	realChart := tamper(t, chart, suspendChart, wrong)
	hr := helmRelease(ns, "app", "demo")
	if err := cp.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, readyIs(hr, false), "Ready=False")
	mismatch(hr, "OCIRepository/"+ns+"/demo", realChart)
	if _, err := os.Stat(filepath.Dir(e.Store().Path(source.Artifact{Path: realChart.Path}))); !os.IsNotExist(err) {
		t.Fatalf("a rebuild that failed the check reached the store: %v", err)
	}

	for obj, suspend := range map[client.Object]func(bool){gr: suspendGit, chart: suspendChart} {
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		suspend(false)
		if err := cp.Client.Patch(ctx, obj, patch); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
}

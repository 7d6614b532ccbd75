package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// TestArtifactGeneratorOverMemoryBudget: with a 64 KiB memory budget, a
// generator whose output holds 192 KiB is composed on disk and becomes
// Ready with the artifact an in-memory build gives, and a small generator
// beside it becomes Ready too.
func TestArtifactGeneratorOverMemoryBudget(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	big := map[string]string{}
	for i := range 4 {
		big[fmt.Sprintf("part-%d.yaml", i)] = "data: " + strings.Repeat(fmt.Sprint(i), 48<<10-7) + "\n"
	}
	for repo, files := range map[string]map[string]string{"big": big, "small": {"cm.yaml": configMap("cm", ns)}} {
		if _, err := reg.PushArtifact(ctx, "manifests/"+repo, "v1", files, nil); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, engine.Options{GeneratorMemoryBytes: 64 << 10})
	var objs []client.Object
	for _, name := range []string{"big", "small"} {
		objs = append(objs, manifestSource(ns, name, "oci://"+reg.Host()+"/manifests/"+name, "v1"), &swv1beta1.ArtifactGenerator{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: swv1beta1.ArtifactGeneratorSpec{
				Sources: []swv1beta1.SourceReference{{Alias: "src", Kind: sourcev1.OCIRepositoryKind, Name: name}},
				OutputArtifacts: []swv1beta1.OutputArtifact{{
					Name: name + "-out", Copy: []swv1beta1.CopyOperation{{From: "@src/**", To: "@artifact/"}},
				}},
			},
		})
	}
	for _, o := range objs {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"small", "big"} {
		gen := &swv1beta1.ArtifactGenerator{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		waitFor(t, gen, readyIs(gen, true), "Ready=True")
	}
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "big-out", Namespace: ns}}
	waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "an artifact")
	if want := inMemoryDigest(t, big); ea.Status.Artifact.Digest != want {
		t.Fatalf("the output built on disk has digest %s, want the in-memory build's %s", ea.Status.Artifact.Digest, want)
	}
}

// inMemoryDigest is the digest of files copied whole into an artifact by
// a build held in memory (the default budget).
func inMemoryDigest(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := generate.NewBudget(0)
	a, _, err := generate.Build(context.Background(), st, source.Object{Kind: sourcev1.ExternalArtifactKind, Namespace: "ns", Name: "want"},
		map[string]generate.Source{"src": {FS: root.FS()}}, generate.Spec{Copy: []generate.Copy{{From: "@src/**", To: "@artifact/"}}},
		generate.BuildOptions{Memory: budget})
	if err != nil || budget.Peak() == 0 {
		t.Fatalf("in-memory build: %v (peak %d bytes held)", err, budget.Peak())
	}
	return a.Digest
}

package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	swv1beta1 "github.com/fluxcd/source-watcher/api/v2/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// Two engines split the kinds, as cozy-aio beside Flux's controllers as
// their source-watcher: one reconciles the OCIRepository, the other only
// the ArtifactGenerator, woken by the source's new artifact that the
// first wrote. Neither reconciles the HelmRelease.
func TestKindsSplitBetweenEngines(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	// The generator's engine starts first: it must wait for the source
	// that another process makes ready.
	startEngine(t, engine.Options{Kinds: []string{swv1beta1.ArtifactGeneratorKind}})
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "chart", Kind: sourcev1.OCIRepositoryKind, Name: "demo"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name: "demo-chart", Copy: []swv1beta1.CopyOperation{{From: "@chart/**", To: "@artifact/"}},
			}},
		},
	}
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.ExternalArtifactKind, Name: "demo-chart"},
		},
	}
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	for _, o := range []client.Object{gen, hr, src} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, gen, func() bool {
		c := conditions.Get(gen, meta.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse
	}, "the generator waiting for its source")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	if len(src.Status.Conditions) != 0 {
		t.Fatalf("the OCIRepository was reconciled by the generator's engine: %+v", src.Status.Conditions)
	}

	startEngine(t, engine.Options{Kinds: []string{sourcev1.OCIRepositoryKind}})
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "demo-chart", Namespace: ns}}
	waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "ExternalArtifact with an artifact")
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	if len(hr.Status.Conditions) != 0 || len(hr.Status.History) != 0 {
		t.Fatalf("the HelmRelease was reconciled, but no engine runs that kind: %+v", hr.Status)
	}
}

func TestKindsRefusesAnUnknownKind(t *testing.T) {
	_, err := engine.New(cp.Config, engine.Options{Kinds: []string{"HelmReleases"}, DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `"HelmReleases"`) {
		t.Fatalf("engine.New with kind HelmReleases: %v, want an error naming it", err)
	}
}

// A source whose artifact another engine wrote (source-controller, before a
// switch-over or beside cozy-aio as its source-watcher) is fetched from
// status.artifact.url and checked against its digest, as Flux's consumers
// do: that archive is not byte for byte what cozy-aio would build, so a
// rebuild from upstream could never match it.
func TestArtifactOfAnotherServerIsFetched(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	// The other server listens on loopback, which the destination policy
	// refuses for foreign artifacts by default.
	startEngine(t, engine.Options{Kinds: []string{swv1beta1.ArtifactGeneratorKind}, Destinations: loopbackDestinations})
	gets, gen := foreignArtifactGenerator(ctx, t, ns)
	readyOnce := func(name, what string) {
		t.Helper()
		ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		waitFor(t, ea, func() bool { return ea.Status.Artifact != nil && conditions.IsReady(ea) }, "ExternalArtifact "+name+" with an artifact")
		if n := gets.Load(); n != 1 {
			t.Errorf("%s, the foreign artifact was fetched %d times, want 1", what, n)
		}
	}
	readyOnce("demo", "after the first output")

	// A second output of the same source reads it from the store. (The
	// engine writes the generator's status meanwhile: retry on conflict.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(gen), gen); err != nil {
			return err
		}
		gen.Spec.OutputArtifacts = append(gen.Spec.OutputArtifacts, swv1beta1.OutputArtifact{
			Name: "demo-copy", Copy: []swv1beta1.CopyOperation{{From: "@pkg/chart/Chart.yaml", To: "@artifact/Chart.yaml"}},
		})
		return cp.Client.Update(ctx, gen)
	}); err != nil {
		t.Fatal(err)
	}
	readyOnce("demo-copy", "after a second output")

	// An artifact whose bytes do not match its digest is refused.
	src := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "packages", Namespace: ns}}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			return err
		}
		src.Status.Artifact.Digest = "sha256:" + strings.Repeat("0", 64)
		src.Status.Artifact.Revision = "sha256:" + strings.Repeat("cd", 32)
		return cp.Client.Status().Update(ctx, src)
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gen, func() bool {
		c := conditions.Get(gen, meta.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "digest")
	}, "the generator refusing an artifact whose digest does not match")
}

// foreignArtifactGenerator serves an artifact from a server of its own, as
// source-controller would, names it in an OCIRepository's status, and
// creates an ArtifactGenerator that copies from it. It returns the count
// of the server's GETs and the generator.
func foreignArtifactGenerator(ctx context.Context, t *testing.T, ns string) (*atomic.Int32, *swv1beta1.ArtifactGenerator) {
	t.Helper()
	archive, err := testenv.TarGz(map[string]string{"chart/Chart.yaml": "name: demo\nversion: 1.0.0\n"}, "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	gets := &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		_, _ = w.Write(archive)
	}))
	t.Cleanup(srv.Close)
	// The OCIRepository's status as source-controller writes it: its
	// path and URL name the file by the revision.
	src := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "packages", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://registry.invalid/packages", Interval: &metav1.Duration{Duration: time.Hour},
		},
	}
	if err := cp.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	rev := "sha256:" + strings.Repeat("ab", 32)
	filePath := "ocirepository/" + ns + "/packages/" + rev + ".tar.gz"
	src.Status.Artifact = &meta.Artifact{
		Path: filePath, URL: srv.URL + "/" + filePath, Revision: rev, Digest: digest,
		Size: ptr.To(int64(len(archive))), LastUpdateTime: metav1.Now(),
	}
	conditions.MarkTrue(src, meta.ReadyCondition, meta.SucceededReason, "stored artifact for digest '%s'", rev)
	if err := cp.Client.Status().Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	gen := &swv1beta1.ArtifactGenerator{
		ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: ns},
		Spec: swv1beta1.ArtifactGeneratorSpec{
			Sources: []swv1beta1.SourceReference{{Alias: "pkg", Kind: sourcev1.OCIRepositoryKind, Name: "packages"}},
			OutputArtifacts: []swv1beta1.OutputArtifact{{
				Name: "demo", Copy: []swv1beta1.CopyOperation{{From: "@pkg/chart/**", To: "@artifact/"}},
			}},
		},
	}
	if err := cp.Client.Create(ctx, gen); err != nil {
		t.Fatal(err)
	}
	return gets, gen
}

// TestArtifactOfARefusedServerIsNotFetched: a status.artifact.url is its
// writer's to choose, so it passes the destination policy: on loopback,
// refused by default, it is never fetched, and the error names the policy.
func TestArtifactOfARefusedServerIsNotFetched(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	startEngine(t, engine.Options{Kinds: []string{swv1beta1.ArtifactGeneratorKind}})
	gets, gen := foreignArtifactGenerator(ctx, t, ns)
	waitFor(t, gen, func() bool {
		r := conditions.Get(gen, meta.ReadyCondition)
		return r != nil && r.Status == metav1.ConditionFalse && strings.Contains(r.Message, "destination policy")
	}, "Ready=False naming the destination policy")
	if n := gets.Load(); n != 0 {
		t.Fatalf("the refused server got %d requests, want 0", n)
	}
}

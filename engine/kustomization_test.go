package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

func configMap(name, ns string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  key: value\n"
}

// gitSource serves files at branch main and creates a GitRepository for it.
func gitSource(t testing.TB, ns, name string, files map[string]string) (*testenv.GitRepo, *sourcev1.GitRepository) {
	t.Helper()
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	repo, err := srv.Repo(name + ".git")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit("main", files, "initial"); err != nil {
		t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.GitRepositorySpec{
			URL: repo.URL(), Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	}
	if err := cp.Client.Create(context.Background(), gr); err != nil {
		t.Fatal(err)
	}
	return repo, gr
}

func kustomization(ns, name, source, path string) *kustomizev1.Kustomization {
	return &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{
			Interval:  metav1.Duration{Duration: time.Hour},
			Path:      path,
			Prune:     true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: source},
		},
	}
}

func exists(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestKustomizationAppliesAndPrunesAcrossCommits(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo, _ := gitSource(t, ns, "apps", map[string]string{
		"deploy/a.yaml": configMap("a", ns),
		"deploy/b.yaml": configMap("b", ns),
	})
	startEngine(t, engine.Options{})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	if err := cp.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	first := ks.Status.LastAppliedRevision
	if !strings.HasPrefix(first, "main@sha1:") || len(ks.Status.Inventory.Entries) != 2 {
		t.Fatalf("revision %q inventory %+v", first, ks.Status.Inventory)
	}
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}}
	if !exists(t, a) || !exists(t, b) {
		t.Fatal("both ConfigMaps should exist after the first commit")
	}
	if a.Labels["kustomize.toolkit.fluxcd.io/name"] != "apps" {
		t.Fatalf("applied objects carry Flux's owner labels, got %v", a.Labels)
	}

	// Second commit: b leaves, c arrives. Ask for a reconcile as the flux CLI does.
	if _, err := repo.Commit("main", map[string]string{
		"deploy/a.yaml": configMap("a", ns),
		"deploy/c.yaml": configMap("c", ns),
	}, "second"); err != nil {
		t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns}}
	requestReconcile(t, gr)
	waitFor(t, ks, func() bool { return ks.Status.LastAppliedRevision != first && conditions.IsReady(ks) }, "second revision applied")
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}
	if !exists(t, a) || !exists(t, c) {
		t.Fatal("a and c should exist after the second commit")
	}
	if exists(t, b) {
		t.Fatal("b left the source and must be pruned")
	}

	// Deleting the Kustomization prunes its inventory (finalizer).
	if err := cp.Client.Delete(ctx, ks); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for exists(t, a) {
		if time.Now().After(deadline) {
			t.Fatal("deleting a pruning Kustomization must prune its inventory")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The finalizer goes in a write after the prune: the Kustomization
	// is gone soon after its objects.
	for exists(t, ks) {
		if time.Now().After(deadline) {
			t.Fatal("the Kustomization should be gone once its finalizer ran")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestKustomizationBadInputs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "src", map[string]string{
		"good/cm.yaml":              configMap("good", ns),
		"broken/kustomization.yaml": "resources: [missing.yaml]\n",
	})
	startEngine(t, engine.Options{})
	good := kustomization(ns, "good", "src", "./good")
	badPath := kustomization(ns, "bad-path", "src", "./nowhere")
	broken := kustomization(ns, "broken", "src", "./broken")
	noSource := kustomization(ns, "no-source", "absent", "./good")
	// A message over the 1,024 bytes events.k8s.io/v1 allows with an
	// eventTime: its event must still be recorded, as Flux records it.
	longPath := kustomization(ns, "long-path", "src", "./"+strings.Repeat("nowhere-at-all/", 80))
	cycleA := kustomization(ns, "cycle-a", "src", "./good")
	cycleA.Spec.DependsOn = []meta.DependencyReference{{Name: "cycle-b"}}
	cycleB := kustomization(ns, "cycle-b", "src", "./good")
	cycleB.Spec.DependsOn = []meta.DependencyReference{{Name: "cycle-a"}}
	for _, k := range []*kustomizev1.Kustomization{good, badPath, longPath, broken, noSource, cycleA, cycleB} {
		if err := cp.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, good, readyIs(good, true), "Ready=True")
	for _, tc := range []struct {
		k      *kustomizev1.Kustomization
		reason string
		says   []string
	}{
		{badPath, meta.InvalidPathReason, []string{"Kustomization/" + ns + "/bad-path", "./nowhere"}},
		{longPath, meta.InvalidPathReason, []string{"Kustomization/" + ns + "/long-path", longPath.Spec.Path}},
		{broken, meta.BuildFailedReason, []string{"Kustomization/" + ns + "/broken", "missing.yaml"}},
		{noSource, meta.ArtifactFailedReason, []string{"GitRepository/" + ns + "/absent", "not found"}},
		{cycleA, engine.DependencyCycleReason, []string{"cycle-a", "cycle-b"}},
		{cycleB, engine.DependencyCycleReason, []string{"cycle-a", "cycle-b"}},
	} {
		k := tc.k
		// Before its source is ready an object may first wait for it; wait
		// for the failure that is its own.
		waitFor(t, k, func() bool {
			return readyIs(k, false)() && conditions.GetReason(k, meta.ReadyCondition) == tc.reason &&
				containsAll(conditions.GetMessage(k, meta.ReadyCondition), tc.says)
		}, "Ready=False with reason "+tc.reason+" saying "+strings.Join(tc.says, ", "))
	}
	// Each failure is also a Warning event on its object.
	// Events are written asynchronously by the recorder.
	var events eventsv1.EventList
	var sawWarning, sawLong bool
	for deadline := time.Now().Add(30 * time.Second); !(sawWarning && sawLong) && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := cp.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, ev := range events.Items {
			if ev.Type != corev1.EventTypeWarning || ev.Reason != meta.InvalidPathReason {
				continue
			}
			switch ev.Regarding.Name {
			case "bad-path":
				sawWarning = true
			case "long-path":
				sawLong = len(ev.Note) > 1024 && strings.Contains(ev.Note, longPath.Spec.Path)
			}
		}
	}
	if !sawWarning {
		t.Errorf("no Warning event with reason %s on Kustomization bad-path among %d events", meta.InvalidPathReason, len(events.Items))
	}
	if !sawLong {
		t.Errorf("no Warning event with the whole %d-byte path on Kustomization long-path", len(longPath.Spec.Path))
	}
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt, as `flux reconcile` does.
func requestReconcile(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	obj.SetAnnotations(ann)
	if err := cp.Client.Patch(ctx, obj, patch); err != nil {
		t.Fatal(err)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func deploymentYAML(name, ns string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n" +
		"spec:\n  selector:\n    matchLabels: {app: " + name + "}\n  template:\n    metadata:\n      labels: {app: " + name + "}\n" +
		"    spec:\n      containers: [{name: c, image: nginx}]\n"
}

// TestKustomizationWaitsWithItsOwnHealthCheckExprs runs two waits on the
// engine's one health Waiter at once: envtest runs no controllers, so a
// Deployment never becomes ready by kstatus, and only the Kustomization
// whose healthCheckExprs say it is Current becomes Ready.
func TestKustomizationWaitsWithItsOwnHealthCheckExprs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	gitSource(t, ns, "apps", map[string]string{
		"plain/web.yaml":   deploymentYAML("plain", ns),
		"checked/web.yaml": deploymentYAML("checked", ns),
	})
	startEngine(t, engine.Options{})
	plain := kustomization(ns, "plain", "apps", "./plain")
	plain.Spec.Wait = true
	plain.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Second} // Flux's GetTimeout floors it at 30s
	checked := kustomization(ns, "checked", "apps", "./checked")
	checked.Spec.Wait = true
	checked.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
	checked.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{
		APIVersion: "apps/v1", Kind: "Deployment",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "metadata.generation >= 1"},
	}}
	for _, ks := range []*kustomizev1.Kustomization{plain, checked} {
		if err := cp.Client.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, checked, readyIs(checked, true), "Ready=True by its healthCheckExprs")
	waitFor(t, plain, func() bool {
		c := conditions.Get(plain, meta.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == meta.HealthCheckFailedReason
	}, "Ready=False, HealthCheckFailed")
}

package engine_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/switchover"
)

// fluxFixtures were recorded from Flux's source-, helm- and
// kustomize-controller (v1.9.2, v1.6.2, v1.9.6: Flux 2.9) with
// examples/cozystack -record; the file's first lines give the command.
const fluxFixtures = "testdata/switchover/flux-2.9.yaml"

// TestTakeOverFromFluxFixtures: what Flux's controllers left of 20
// HelmReleases (16 from an OCIRepository, 2 from a HelmRepository through
// the HelmCharts Flux generated, 2 from an ExternalArtifact) and 2
// Kustomizations with prune (release Secrets, applied objects with Flux's
// field managers, status as Flux wrote it) is taken over by cozy-aio with
// no new Helm revision, no object written or deleted, and no Warning
// Event: every unit answers a reconcile request and is Ready.
func TestTakeOverFromFluxFixtures(t *testing.T) {
	ctx := context.Background()
	reg := chartRegistry(t)
	digest, err := switchover.Push(ctx, reg, 2)
	if err != nil {
		t.Fatal(err)
	}
	loaded := loadFixtures(t, fluxFixtures)
	if len(loaded.Units) == 0 || len(loaded.Applied) == 0 {
		t.Fatalf("the fixtures hold %d units and %d objects", len(loaded.Units), len(loaded.Applied))
	}
	o := switchover.Options{Host: reg.Host(), Insecure: true, AppsDigest: digest}
	for _, u := range append(o.Sources(switchover.NamespaceOf(0)), o.AppsSource()) {
		if err := cp.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	before, err := switchover.Versions(ctx, cp.Client, loaded.Applied)
	if err != nil {
		t.Fatal(err)
	}
	generations := func() map[string]int64 {
		out := map[string]int64{}
		for _, u := range loaded.Units {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
				t.Fatal(err)
			}
			out[u.GetKind()+"/"+u.GetName()] = live.GetGeneration()
		}
		return out
	}
	generationsBefore := generations()
	records := func() []string {
		var l corev1.SecretList
		if err := cp.Client.List(ctx, &l, client.InNamespace(switchover.NamespaceOf(0)), client.MatchingLabels{"owner": "helm"}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range l.Items {
			out = append(out, s.Name+"@"+s.ResourceVersion)
		}
		slices.Sort(out)
		return out
	}
	recordsBefore := records()

	start := time.Now()
	startEngine(t, engine.Options{})
	var handled []*unstructured.Unstructured
	for _, u := range loaded.Units {
		if u.GetKind() != "HelmChart" {
			handled = append(handled, u)
		}
	}
	token := requestReconcileOf(t, handled)
	var pending []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, u := range handled {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
				return false, err
			}
			at, _, _ := unstructured.NestedString(live.Object, "status", "lastHandledReconcileAt")
			if status, message := readyOf(live); at != token || status != "True" {
				pending = append(pending, fmt.Sprintf("%s %s (%s, handled %q, want %q: %s)", u.GetKind(), u.GetName(), status, at, token, message))
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("not answered and Ready: %v: %v", pending, err)
	}
	t.Logf("%d HelmReleases and Kustomizations answered and Ready %.1f s after the engine's start", len(handled), time.Since(start).Seconds())

	for k, g := range generations() {
		if g != generationsBefore[k] {
			t.Errorf("%s: spec written (generation %d → %d)", k, generationsBefore[k], g)
		}
	}
	if after := records(); !slices.Equal(after, recordsBefore) {
		t.Errorf("release records changed:\nbefore %v\nafter  %v", recordsBefore, after)
	}
	after, err := switchover.Versions(ctx, cp.Client, loaded.Applied)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range before {
		switch now, ok := after[k]; {
		case !ok:
			t.Errorf("%s deleted", k)
		case now != v:
			t.Errorf("%s rewritten (resourceVersion %s → %s)", k, v, now)
		}
	}
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.Source.Component != "" && e.InvolvedObject.Namespace != "" &&
			(e.InvolvedObject.Namespace == switchover.NamespaceOf(0) || e.InvolvedObject.Namespace == switchover.AppsNamespace) {
			t.Errorf("Warning Event on %s/%s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// loadFixtures loads the fixtures in path (switchover.Load).
func loadFixtures(t *testing.T, path string) switchover.Loaded {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	loaded, err := switchover.Load(context.Background(), cp.Client, f)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

// requestReconcileOf asks each object to reconcile (a new
// reconcile.fluxcd.io/requestedAt) and returns the token it wrote.
func requestReconcileOf(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	token := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token)
	for _, u := range objs {
		if err := cp.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	return token
}

func readyOf(u *unstructured.Unstructured) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == meta.ReadyCondition {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg
		}
	}
	return "", ""
}

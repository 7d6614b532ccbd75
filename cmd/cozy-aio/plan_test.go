package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/plan"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func deployment(ns, selector, image string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: ` + selector + `}}
  template:
    metadata: {labels: {app: ` + selector + `}}
    spec: {containers: [{name: web, image: ` + image + `}]}
`
}

func kustomizeDir(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"kustomization.yaml": "resources: [deploy.yaml]\n", "deploy.yaml": manifest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// adminKubeconfig writes a kubeconfig of the test control plane's
// administrator, for the commands that read one.
func adminKubeconfig(t *testing.T) string {
	t.Helper()
	kc, err := cp.Kubeconfig("plan-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanKustomize: `cozy-aio plan` of a local directory against the live
// cluster: nothing (0), an image tag (1), a selector the API server will
// not change (2), and a directory that does not build (3).
func TestPlanKustomize(t *testing.T) {
	ns := cp.Namespace(t)
	kubeconfig := adminKubeconfig(t)
	live := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(deployment(ns, "web", "nginx:1")), &live.Object); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	planOf := func(manifest string, extra ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args := append([]string{"plan", "--kubeconfig", kubeconfig, "--kustomize", kustomizeDir(t, manifest)}, extra...)
		code := run(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := planOf(deployment(ns, "web", "nginx:1")); code != plan.ExitUnchanged || !strings.Contains(out, "no changes") {
		t.Errorf("the same Deployment: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := planOf(deployment(ns, "web", "nginx:2"))
	if code != plan.ExitChanges || !strings.Contains(out, "~ update Deployment/"+ns+"/web\n") ||
		!strings.Contains(out, `spec.template.spec.containers[0].image: "nginx:1" -> "nginx:2"`) || strings.Contains(out, "risk ") {
		t.Errorf("a new image: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = planOf(deployment(ns, "web2", "nginx:1"), "-o", "json")
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("-o json: %v\n%s%s", err, out, errs)
	}
	if code != plan.ExitRisky || len(p.Risks) != 1 || p.Risks[0].Code != plan.ImmutableChange || p.Risks[0].Object.Name != "web" || !strings.HasPrefix(p.Hash, "sha256:") {
		t.Errorf("a new selector: exit %d, plan %+v, %s", code, p, errs)
	}
	if code, _, errs := planOf("kind: [unclosed"); code != exitPlanError || !strings.Contains(errs, "cozy-aio plan:") {
		t.Errorf("a broken directory: exit %d, %s", code, errs)
	}
	// The live Deployment is as it was: a plan writes nothing.
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(live.GroupVersionKind())
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, got); err != nil {
		t.Fatal(err)
	}
	if img, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers"); img[0].(map[string]any)["image"] != "nginx:1" {
		t.Errorf("the plan changed the Deployment: %v", img)
	}
}

// TestPlanKustomizeInventory: with --inventory, the Kustomization's objects
// the directory drops are deletions; a PersistentVolumeClaim's is DataLoss.
func TestPlanKustomizeInventory(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	kubeconfig := adminKubeconfig(t)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := cp.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := engine.InstallCRDs(ctx, cp.Config, ""); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: engine.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "src"}}}
	if err := c.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	ks.Status.Inventory = &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{
		{ID: ns + "_data__PersistentVolumeClaim", Version: "v1"},
		{ID: ns + "_gone__ConfigMap", Version: "v1"}, // deleted already: left out
	}}
	if err := c.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"plan", "--kubeconfig", kubeconfig, "--kustomize", kustomizeDir(t, deployment(ns, "web", "nginx:1")),
		"--inventory", ns + "/apps"}, &out, &errb)
	if code != plan.ExitRisky || !strings.Contains(out.String(), "+ create Deployment/"+ns+"/web\n") ||
		!strings.Contains(out.String(), "- delete PersistentVolumeClaim/"+ns+"/data\n") ||
		!strings.Contains(out.String(), "risk DataLoss PersistentVolumeClaim/"+ns+"/data: ") || strings.Contains(out.String(), "gone") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}

package helm_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// An upgrade that adds an object someone already created refuses it with
// DisableTakeOwnership, as the helm CLI does, and adopts it by default,
// as helm-controller does (spec.upgrade.disableTakeOwnership).
func TestUpgradeTakesOwnershipUnlessDisabled(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "adopt", Namespace: ns}
	if _, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("demo")}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": rel.Name}
	found := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: rel.Name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:0"}}},
			},
		},
	}
	if err := cp.Client.Create(ctx, found); err != nil {
		t.Fatal(err)
	}
	spec := helm.Spec{Chart: ociChart("demo"), Wait: helm.WaitNone, Values: []map[string]any{values("deployment", true)}}

	_, err := m.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: spec, DisableTakeOwnership: true})
	if err == nil || !strings.Contains(err.Error(), "cannot be imported") {
		t.Fatalf("upgrade over a Deployment the release does not own, ownership not taken: %v", err)
	}
	if err := cp.Client.Get(ctx, clientKey(ns, rel.Name), found); err != nil {
		t.Fatal(err)
	}
	if found.Annotations["meta.helm.sh/release-name"] != "" || found.Spec.Template.Spec.Containers[0].Image != "registry.example/app:0" {
		t.Fatalf("the refused Deployment changed: %v %s", found.Annotations, found.Spec.Template.Spec.Containers[0].Image)
	}

	res, err := m.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: spec})
	if err != nil {
		t.Fatalf("upgrade taking ownership: %v", err)
	}
	if err := cp.Client.Get(ctx, clientKey(ns, rel.Name), found); err != nil {
		t.Fatal(err)
	}
	if found.Annotations["meta.helm.sh/release-name"] != rel.Name || found.Spec.Template.Spec.Containers[0].Image != "registry.example/app:1" {
		t.Fatalf("the Deployment was not adopted by revision %d: %v %s", res.Revision, found.Annotations, found.Spec.Template.Spec.Containers[0].Image)
	}
}

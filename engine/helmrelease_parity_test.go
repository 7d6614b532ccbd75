package engine_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// TestHelmReleaseValuesFromTargetPath checks valuesFrom[].targetPath with
// Flux's meaning (the value lands at the path over spec.values), a
// dependsOn readyExpr, and the errors of a targetPath that collides with a
// non-map value and of a readyExpr that does not compile.
func TestHelmReleaseValuesFromTargetPath(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	if err := cp.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "picked", Namespace: ns},
		StringData: map[string]string{"color": "purple"},
	}); err != nil {
		t.Fatal(err)
	}
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hr := helmRelease(ns, "app", "demo")
	// Flux's chartutil merges spec.values last, even over a targetPath
	// value at a scalar, so the values here do not set color.
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"extra":"x"}`)}
	hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "Secret", Name: "picked", ValuesKey: "color", TargetPath: "color"}}
	collide := helmRelease(ns, "collide", "demo")
	collide.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"color":"red"}`)}
	collide.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "Secret", Name: "picked", ValuesKey: "color", TargetPath: "color.shade"}}
	badExpr := helmRelease(ns, "bad-expr", "demo")
	badExpr.Spec.DependsOn = []meta.DependencyReference{{Name: "app", ReadyExpr: "dep.status.(("}}
	for _, o := range []client.Object{src, hr, collide, badExpr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["color"] != "purple" {
		t.Fatalf("installed ConfigMap = %v, want color purple from the targetPath", cm.Data)
	}
	waitFor(t, collide, func() bool {
		msg := conditions.GetMessage(collide, meta.ReadyCondition)
		return readyIs(collide, false)() && containsAll(msg, []string{"HelmRelease/" + ns + "/collide", "color.shade", "picked"})
	}, "Ready=False naming the object, the target path and the Secret")
	waitFor(t, badExpr, func() bool {
		msg := conditions.GetMessage(badExpr, meta.ReadyCondition)
		return conditions.GetReason(badExpr, meta.ReadyCondition) == meta.InvalidCELExpressionReason &&
			strings.Contains(msg, "readyExpr") && strings.Contains(msg, ":1:")
	}, "InvalidCELExpression with the position")
}

// rendererChart renders a Deployment and a ConfigMap, for post-renderers.
func rendererChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: 2.0.0\n",
		"values.yaml": "{}\n",
		"templates/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: blue
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.0"}]
`,
	}
}

// TestHelmReleasePostRenderers checks spec.postRenderers (strategic merge
// and JSON 6902 patches with targets, images), spec.commonMetadata and
// helm-controller's origin labels on the objects of a real release.
func TestHelmReleasePostRenderers(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, rendererChart())
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "2.0.0")
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.Install = &helmv2.Install{DisableWait: true}
	hr.Spec.Upgrade = &helmv2.Upgrade{DisableWait: true}
	hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{
		Patches: []kustomize.Patch{
			{Patch: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: any\ndata:\n  patched: smp\n", Target: &kustomize.Selector{Kind: "ConfigMap"}},
			{Patch: "- op: replace\n  path: /data/color\n  value: green\n", Target: &kustomize.Selector{Kind: "ConfigMap", Name: "app-settings"}},
			{Patch: "- op: add\n  path: /data/never\n  value: x\n", Target: &kustomize.Selector{Kind: "ConfigMap", Name: "missing"}},
		},
		Images: []kustomize.Image{{Name: "nginx", NewName: "registry.example/nginx", NewTag: "1.2"}, {Name: "absent", NewTag: "9"}},
	}}}
	hr.Spec.CommonMetadata = &helmv2.CommonMetadata{
		Labels:      map[string]string{"team": "a", "helm.toolkit.fluxcd.io/name": "overridden"},
		Annotations: map[string]string{"owner": "x"},
	}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) {
		t.Fatal("no ConfigMap")
	}
	if cm.Data["patched"] != "smp" || cm.Data["color"] != "green" {
		t.Errorf("patches not applied: %v", cm.Data)
	}
	want := map[string]string{"team": "a", "helm.toolkit.fluxcd.io/name": "app", "helm.toolkit.fluxcd.io/namespace": ns}
	for k, v := range want {
		if cm.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, cm.Labels[k], v, cm.Labels)
		}
	}
	if cm.Annotations["owner"] != "x" {
		t.Errorf("annotations %v", cm.Annotations)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app-web", Namespace: ns}}
	if !exists(t, dep) {
		t.Fatal("no Deployment")
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "registry.example/nginx:1.2" {
		t.Errorf("image = %s", img)
	}
	if dep.Spec.Selector.MatchLabels["team"] != "" || dep.Spec.Template.Labels["team"] != "" {
		t.Errorf("common labels reached selectors or templates: %v %v", dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels)
	}
	// An override that matches no image: a warning, not a failure.
	waitFor(t, hr, func() bool {
		return eventNote(t, ns, helmv2.HelmReleaseKind, "app", `spec.postRenderers[0].kustomize.images[1] "absent"`) != ""
	}, "a Warning Event naming the unused image override")
	if note := eventNote(t, ns, helmv2.HelmReleaseKind, "app", "kustomize.images[0]"); note != "" {
		t.Errorf("the used override gets an event: %s", note)
	}
	// A patch whose target selects nothing: a warning too, naming it.
	waitFor(t, hr, func() bool {
		return eventNote(t, ns, helmv2.HelmReleaseKind, "app", `spec.postRenderers[0].kustomize.patches[2] target {kind="ConfigMap", name="missing"} matches no object`) != ""
	}, "a Warning Event naming the patch that matches nothing")
	for _, i := range []string{"0", "1"} {
		if note := eventNote(t, ns, helmv2.HelmReleaseKind, "app", "kustomize.patches["+i+"]"); note != "" {
			t.Errorf("a patch that applied gets an event: %s", note)
		}
	}
}

// TestHelmReleasePreserveValues checks upgrade.preserveValues: an upgrade
// keeps the values of the last release under the new ones (Helm's
// --reuse-values), where by default the new values are the whole truth.
func TestHelmReleasePreserveValues(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	keep := helmRelease(ns, "keep", "demo")
	keep.Spec.Upgrade = &helmv2.Upgrade{PreserveValues: true}
	reset := helmRelease(ns, "reset", "demo")
	for _, hr := range []*helmv2.HelmRelease{keep, reset} {
		hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"color":"green"}`)}
	}
	for _, o := range []client.Object{src, keep, reset} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, hr := range []*helmv2.HelmRelease{keep, reset} {
		waitFor(t, hr, readyIs(hr, true), "Ready=True")
		hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"extra":"y"}`)}
		if err := cp.Client.Update(ctx, hr); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"keep": "green", "reset": "blue"}
	for _, hr := range []*helmv2.HelmRelease{keep, reset} {
		waitFor(t, hr, func() bool {
			return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
		}, "upgrade to revision 2")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: hr.Name + "-settings", Namespace: ns}}
		if !exists(t, cm) || cm.Data["color"] != want[hr.Name] {
			t.Errorf("%s: color = %q after the upgrade, want %q", hr.Name, cm.Data["color"], want[hr.Name])
		}
	}
}

// TestHelmReleaseHealthCheckExprs checks spec.healthCheckExprs in the
// release's wait: envtest runs no controllers, so the Deployment is never
// Current by kstatus, and only the expression makes the release ready; an
// expression that does not compile stalls naming the field.
func TestHelmReleaseHealthCheckExprs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, rendererChart())
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "2.0.0")
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{
		APIVersion: "apps/v1", Kind: "Deployment",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "metadata.name == 'app-web'"},
	}}
	bad := helmRelease(ns, "bad", "demo")
	bad.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{
		APIVersion: "apps/v1", Kind: "Deployment",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "metadata.(("},
	}}
	for _, o := range []client.Object{src, hr, bad} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True through the healthCheckExprs")
	waitFor(t, bad, func() bool {
		return conditions.GetReason(bad, meta.ReadyCondition) == meta.InvalidCELExpressionReason &&
			strings.Contains(conditions.GetMessage(bad, meta.ReadyCondition), "spec.healthCheckExprs")
	}, "InvalidCELExpression naming spec.healthCheckExprs")
}

// TestHelmReleaseDriftIgnore checks driftDetection.ignore: a correction
// restores drifted fields but keeps the ignored JSON pointers of the
// objects the target selects, as helm-controller does.
func TestHelmReleaseDriftIgnore(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.DriftDetection = &helmv2.DriftDetection{
		Mode:   helmv2.DriftDetectionEnabled,
		Ignore: []helmv2.IgnoreRule{{Paths: []string{"/data/color"}, Target: &kustomize.Selector{Kind: "ConfigMap", Name: "app-settings"}}},
	}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) {
		t.Fatal("no ConfigMap")
	}
	cm.Data["color"], cm.Data["chart"] = "edited", "tampered"
	if err := cp.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, hr)
	deadline := time.Now().Add(60 * time.Second)
	for want := sourceChartVersion(t, src, "1.0.0"); exists(t, cm) && cm.Data["chart"] != want; {
		if time.Now().After(deadline) {
			t.Fatalf("the drifted field was not corrected: %v", cm.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if cm.Data["color"] != "edited" {
		t.Fatalf("the ignored field was corrected: %v", cm.Data)
	}
}

// TestHelmReleaseRollbackDefaults checks the remedying rollback of a
// HelmRelease without spec.rollback runs with helm-controller's rollback
// defaults, not with the install's or upgrade's settings: the install and
// upgrade disable hooks, and the rollback still runs its pre-rollback hook.
func TestHelmReleaseRollbackDefaults(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	chart := demoChart("1.0.0")
	chart["templates/fail.yaml"] = `{{- if .Values.fail }}
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-broken
spec:
  ports:
    - port: 70000
{{- end }}
`
	chart["templates/hook.yaml"] = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-rollback-hook
  annotations:
    helm.sh/hook: pre-rollback
    helm.sh/hook-delete-policy: before-hook-creation
data:
  ran: "yes"
`
	reg := chartRegistry(t, chart)
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.Install = &helmv2.Install{DisableHooks: true}
	hr.Spec.Upgrade = &helmv2.Upgrade{DisableHooks: true, Remediation: &helmv2.UpgradeRemediation{Retries: 1}}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"fail":true}`)}
	if err := cp.Client.Update(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return len(hr.Status.History) > 0 && strings.HasPrefix(hr.Status.History[0].Status, "deployed") && hr.Status.History[0].Version >= 3
	}, "a failed upgrade rolled back")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-rollback-hook", Namespace: ns}}
	if !exists(t, cm) || cm.Data["ran"] != "yes" {
		t.Fatal("the rollback did not run its hook: without spec.rollback, Flux's rollback runs hooks whatever install and upgrade say")
	}
	// As helm-controller: Remediated=True names the release rolled back to;
	// Ready, False, keeps naming the failure that was remedied.
	remedied := regexp.MustCompile(`^Helm rollback to previous release ` + ns + `/app\.v[0-9]+ with chart demo@1\.0\.0\+[0-9a-f]+ succeeded$`)
	waitFor(t, hr, func() bool {
		c := conditions.Get(hr, helmv2.RemediatedCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == helmv2.RollbackSucceededReason && remedied.MatchString(c.Message)
	}, "Remediated=True RollbackSucceeded")
	waitFor(t, hr, func() bool {
		r := conditions.Get(hr, meta.ReadyCondition)
		return r != nil && r.Status == metav1.ConditionFalse && strings.Contains(r.Message, "70000")
	}, "Ready=False naming the invalid port that failed the upgrade")
}

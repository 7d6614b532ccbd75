package engine_test

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
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

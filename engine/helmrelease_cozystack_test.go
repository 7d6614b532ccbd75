package engine_test

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// crdYAML is a namespaced CRD of kind in group with one served version.
func crdYAML(group, kind, plural string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.` + group + `
spec:
  group: ` + group + `
  names:
    kind: ` + kind + `
    plural: ` + plural + `
    singular: ` + strings.ToLower(kind) + `
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`
}

// vmOperatorChart is shaped as Cozystack's victoria-metrics-operator: the
// CRDs are in a subchart's crds/ directory and the parent renders the same
// CRDs as templates, so the install finds them created (bare, from crds/)
// before it applies its templates.
func vmOperatorChart() map[string]string {
	crd := crdYAML("operator.take.cozy-aio.io", "VMRule", "vmrules")
	return map[string]string{
		"Chart.yaml": `apiVersion: v2
name: victoria-metrics-operator
version: 1.0.0
dependencies:
  - name: crds
    version: 1.0.0
    condition: crds.plain
`,
		"values.yaml":              "crds:\n  plain: true\n",
		"templates/crd.yaml":       crd,
		"charts/crds/Chart.yaml":   "apiVersion: v2\nname: crds\nversion: 1.0.0\n",
		"charts/crds/crds/vm.yaml": crd,
	}
}

// helm-controller installs with Helm's TakeOwnership unless
// spec.install.disableTakeOwnership: a CRD the chart ships both in a
// subchart's crds/ and as a template is adopted by the install; with the
// field set, the install refuses it, as the helm CLI does.
func TestHelmReleaseTakesOwnershipOfTheCRDsItAlsoTemplates(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, vmOperatorChart())
	startEngine(t, engine.Options{})
	src := chartSource(ns, "vm", reg.Host(), "1.0.0")
	hr := helmRelease(ns, "vm-operator", "vm")
	hr.Spec.Install = &helmv2.Install{DisableTakeOwnership: true}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = cp.Client.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "vmrules.operator.take.cozy-aio.io"}})
	})
	waitFor(t, hr, func() bool {
		c := conditions.Get(hr, meta.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "cannot be imported")
	}, "Ready=False: the CRD exists and cannot be imported")

	// Without the field (helm-controller's default), the install adopts it.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	hr.Spec.Install.DisableTakeOwnership = false
	if err := cp.Client.Update(ctx, hr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return readyIs(hr, true)() && hr.Status.ObservedGeneration == hr.Generation
	}, "Ready=True after the CRD was adopted")
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "vmrules.operator.take.cozy-aio.io"}}
	if !exists(t, crd) {
		t.Fatal("the CRD is gone")
	}
	if got := crd.Annotations["meta.helm.sh/release-name"]; got != "vm-operator" {
		t.Fatalf("the CRD's release annotation is %q, want vm-operator (adopted by the release)", got)
	}
}

// umbrellaChart is a Cozystack-style umbrella chart: an operator subchart
// enabled by a condition and an agents subchart enabled by a tag, each
// with a CRD in its crds/ directory; the values turn the operator off.
func umbrellaChart() map[string]string {
	return map[string]string{
		"Chart.yaml": `apiVersion: v2
name: monitoring
version: 1.0.0
dependencies:
  - name: operator
    version: 1.0.0
    condition: operator.enabled
  - name: agents
    version: 1.0.0
    tags: [agents]
`,
		"values.yaml":                     "operator:\n  enabled: false\ntags:\n  agents: true\n",
		"templates/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-umbrella\n",
		"charts/operator/Chart.yaml":      "apiVersion: v2\nname: operator\nversion: 1.0.0\n",
		"charts/operator/crds/alert.yaml": crdYAML("cond.cozy-aio.io", "Alert", "alerts"),
		"charts/agents/Chart.yaml":        "apiVersion: v2\nname: agents\nversion: 1.0.0\n",
		"charts/agents/crds/probe.yaml":   crdYAML("cond.cozy-aio.io", "Probe", "probes"),
	}
}

// The CRD step follows Helm's rules for which subcharts are enabled: the
// CRDs of a subchart its condition turns off are not installed; those of
// a subchart a tag turns on are, as helm-controller does.
func TestHelmReleaseInstallsTheCRDsOfEnabledSubchartsOnly(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, umbrellaChart())
	startEngine(t, engine.Options{})
	src := chartSource(ns, "monitoring", reg.Host(), "1.0.0")
	hr := helmRelease(ns, "monitoring", "monitoring")
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	probes := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "probes.cond.cozy-aio.io"}}
	alerts := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "alerts.cond.cozy-aio.io"}}
	t.Cleanup(func() {
		_ = cp.Client.Delete(context.Background(), probes)
		_ = cp.Client.Delete(context.Background(), alerts)
	})
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	if !exists(t, probes) {
		t.Error("the CRD of the subchart its tag enables was not installed")
	}
	if exists(t, alerts) {
		t.Error("the CRD of the subchart its condition disables was installed")
	}
}

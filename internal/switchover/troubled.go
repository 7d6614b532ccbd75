package switchover

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

// The troubled releases: what an engine leaves behind when a release
// fails, or when it stops in the middle of an action.
const (
	// TroubledNamespace holds them and their source.
	TroubledNamespace = "acceptance-troubled"
	// InstallFailed's install fails (an object the API server refuses):
	// its only revision is failed, and its install retries are exhausted.
	InstallFailed = "install-failed"
	// UpgradeFailed is installed, then its values change to ones whose
	// upgrade fails: revision 1 deployed, revision 2 failed, upgrade
	// retries exhausted.
	UpgradeFailed = "upgrade-failed"
	// PendingInstall's install waits for a Deployment that never becomes
	// ready (30 minutes): an engine stopped meanwhile leaves revision 1
	// pending-install.
	PendingInstall = "pending-install"
	// Tested is installed with spec.test.enable from TestedChart, whose
	// test hook passes: revision 1 deployed and tested, which an engine
	// taking over neither upgrades nor tests again.
	Tested = "tested"
)

// TestedChart renders a ConfigMap and a test hook that is a ConfigMap
// too: Helm's test passes once the hook is created, with no Pod to run
// (none does on a simulated cluster).
func TestedChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: tested\nversion: 1.0.0\ndescription: A release with a test hook.\n",
		"values.yaml": "{}\n",
		"templates/objects.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  labels: {app.kubernetes.io/instance: {{ .Release.Name }}}
data:
  release: {{ .Release.Name }}
`,
		"templates/tests/check.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-check
  annotations:
    helm.sh/hook: test
    helm.sh/hook-delete-policy: before-hook-creation
data:
  checked: {{ .Release.Name }}
`,
	}
}

// TroubledChart renders a ConfigMap; with values bad, one whose name the
// API server refuses; with values block, a Deployment whose Pod no node
// can take.
func TroubledChart() map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: troubled\nversion: 1.0.0\ndescription: A release that fails or waits, by its values.\n",
		"values.yaml": "bad: false\nblock: false\n",
		"templates/objects.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ if .Values.bad }}Not_A_DNS_Name{{ else }}{{ .Release.Name }}{{ end }}
  labels: {app.kubernetes.io/instance: {{ .Release.Name }}}
data:
  release: {{ .Release.Name }}
{{- if .Values.block }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app.kubernetes.io/instance: {{ .Release.Name }}}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      nodeSelector: {acceptance.cozystack.io/no-such-node: "true"}
      containers: [{name: app, image: registry.example.org/blocked:1.0.0}]
{{- end }}
`,
	}
}

// PushTroubled pushes TroubledChart and TestedChart.
func PushTroubled(ctx context.Context, reg *testenv.Registry) error {
	if _, err := reg.PushChartAnnotated(ctx, "acceptance-charts/troubled", TroubledChart(), Created); err != nil {
		return err
	}
	_, err := reg.PushChartAnnotated(ctx, "acceptance-charts/tested", TestedChart(), Created)
	return err
}

// TestedSource is the OCIRepository of TestedChart.
func (o Options) TestedSource() *unstructured.Unstructured {
	return object("source.toolkit.fluxcd.io/v1", "OCIRepository", TroubledNamespace, "tested", o.source(map[string]any{
		"url": "oci://" + o.Host + "/acceptance-charts/tested", "interval": "10m",
		"ref":           map[string]any{"tag": "1.0.0"},
		"layerSelector": map[string]any{"mediaType": testenv.HelmChartMediaType, "operation": "copy"},
	}))
}

// TroubledSource is the OCIRepository of TroubledChart.
func (o Options) TroubledSource() *unstructured.Unstructured {
	return object("source.toolkit.fluxcd.io/v1", "OCIRepository", TroubledNamespace, "troubled", o.source(map[string]any{
		"url": "oci://" + o.Host + "/acceptance-charts/troubled", "interval": "10m",
		"ref":           map[string]any{"tag": "1.0.0"},
		"layerSelector": map[string]any{"mediaType": testenv.HelmChartMediaType, "operation": "copy"},
	}))
}

// TroubledRelease is one of InstallFailed, UpgradeFailed (with its first,
// good values) and PendingInstall, with the default remediation (no
// retries).
func TroubledRelease(name string) *unstructured.Unstructured {
	spec := map[string]any{"interval": "10m", "chartRef": map[string]any{"kind": "OCIRepository", "name": "troubled"}}
	switch name {
	case InstallFailed:
		spec["values"] = map[string]any{"bad": true}
	case PendingInstall:
		spec["values"] = map[string]any{"block": true}
		spec["timeout"] = "30m"
	case Tested:
		spec["chartRef"] = map[string]any{"kind": "OCIRepository", "name": "tested"}
		spec["test"] = map[string]any{"enable": true}
	}
	return object("helm.toolkit.fluxcd.io/v2", "HelmRelease", TroubledNamespace, name, spec)
}

// CreateTroubled creates the troubled releases and their source.
func CreateTroubled(ctx context.Context, c client.Client, o Options) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TroubledNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, u := range []*unstructured.Unstructured{o.TroubledSource(), o.TestedSource(),
		TroubledRelease(InstallFailed), TroubledRelease(UpgradeFailed), TroubledRelease(PendingInstall), TroubledRelease(Tested)} {
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// ReleaseStatuses are the statuses of a release's Helm records by
// revision ("1:deployed,2:failed"), read from their Secrets' labels.
func ReleaseStatuses(ctx context.Context, c client.Reader, ns, name string) (string, error) {
	var l corev1.SecretList
	if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		return "", err
	}
	by := map[int]string{}
	top := 0
	for _, s := range l.Items {
		var v int
		if _, err := fmt.Sscan(s.Labels["version"], &v); err != nil {
			continue
		}
		by[v], top = s.Labels["status"], max(top, v)
	}
	out := ""
	for v := 1; v <= top; v++ {
		if st, ok := by[v]; ok {
			if out != "" {
				out += ","
			}
			out += fmt.Sprintf("%d:%s", v, st)
		}
	}
	return out, nil
}

// Trouble brings the troubled releases to their states, given an engine
// that reconciles them: it waits for UpgradeFailed to be installed, gives
// it its bad values, and waits until InstallFailed's records read
// "1:failed", UpgradeFailed's "1:deployed,2:failed" and PendingInstall's
// "1:pending-install", and the first two are no longer Reconciling.
func Trouble(ctx context.Context, c client.Client, timeout time.Duration) error {
	want := map[string]string{InstallFailed: "1:failed", UpgradeFailed: "1:deployed,2:failed", PendingInstall: "1:pending-install", Tested: "1:deployed"}
	patched := false
	got := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		done := true
		for name, w := range want {
			st, err := ReleaseStatuses(ctx, c, TroubledNamespace, name)
			if err != nil {
				return false, err
			}
			got[name] = st
			if name == UpgradeFailed && !patched && st == "1:deployed" {
				patch := []byte(`{"spec":{"values":{"bad":true}}}`)
				hr := TroubledRelease(UpgradeFailed)
				if err := c.Patch(ctx, hr, client.RawPatch(types.MergePatchType, patch)); err != nil {
					return false, err
				}
				patched = true
			}
			if st != w {
				done = false
				continue
			}
			if name != PendingInstall {
				hr := TroubledRelease(name)
				if err := c.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
					return false, err
				}
				ready := "False"
				if name == Tested {
					// Tested too: TestSuccess=True.
					ready = conditionStatus(hr, "TestSuccess")
				}
				if conditionStatus(hr, "Reconciling") == "True" || conditionStatus(hr, "Ready") != ready {
					done = false
				}
			}
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("troubled releases: want %v, have %v: %w", want, got, err)
	}
	return nil
}

func conditionStatus(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// RecordTroubled writes, as Record does, what the engine that ran left of
// the troubled releases: their records, the objects they applied, and
// the HelmReleases with their status.
func RecordTroubled(ctx context.Context, c client.Reader, w io.Writer) error {
	return record(ctx, c, w, TroubledNamespace, []string{InstallFailed, UpgradeFailed, PendingInstall, Tested}, "", nil)
}

package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// demoChart renders one ConfigMap whose data comes from the values.
func demoChart(version string) map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: " + version + "\n",
		"values.yaml": "color: blue\n",
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
  chart: {{ .Chart.Version | quote }}
`,
	}
}

// chartRegistry starts a registry for one test and pushes each chart to
// charts/demo.
func chartRegistry(t *testing.T, charts ...map[string]string) *testenv.Registry {
	t.Helper()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	for _, c := range charts {
		if _, err := reg.PushChart(context.Background(), "charts/demo", c); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func chartSource(ns, name, host, tag string) *sourcev1.OCIRepository {
	return &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL: "oci://" + host + "/charts/demo", Insecure: true,
			Interval:      &metav1.Duration{Duration: time.Hour},
			Reference:     &sourcev1.OCIRepositoryRef{Tag: tag},
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: testenv.HelmChartMediaType, Operation: "copy"},
		},
	}
}

func helmRelease(ns, name, chartSource string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: chartSource},
		},
	}
}

func TestHelmReleaseInstallsAndUpgradesOnNewRevision(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t, demoChart("1.0.0"), demoChart("1.1.0"))
	startEngine(t, engine.Options{})
	if err := cp.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "overrides", Namespace: ns},
		Data:       map[string]string{"values.yaml": "color: green\n"},
	}); err != nil {
		t.Fatal(err)
	}
	src := chartSource(ns, "demo", reg.Host(), "1.0.0")
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "overrides"}}
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"extra":"x"}`)}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, readyIs(hr, true), "Ready=True")
	// As helm-controller: the chart is installed as its version with the
	// OCI artifact's digest.
	v100 := sourceChartVersion(t, src, "1.0.0")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings", Namespace: ns}}
	if !exists(t, cm) || cm.Data["color"] != "green" || cm.Data["chart"] != v100 {
		t.Fatalf("installed ConfigMap = %v, want color green from valuesFrom and chart %s", cm.Data, v100)
	}
	if len(hr.Status.History) != 1 || hr.Status.History[0].Version != 1 || hr.Status.History[0].ChartVersion != v100 {
		t.Fatalf("history = %+v", hr.Status.History)
	}
	var secrets corev1.SecretList
	if err := cp.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "app"}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("release Secrets: %d (%v)", len(secrets.Items), err)
	}

	// A new source revision upgrades the release.
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	src.Spec.Reference.Tag = "1.1.0"
	if err := cp.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgrade to revision 2")
	v110 := sourceChartVersion(t, src, "1.1.0")
	if !exists(t, cm) || cm.Data["chart"] != v110 {
		t.Fatalf("after upgrade the ConfigMap says chart %q, want %s", cm.Data["chart"], v110)
	}
	if hr.Status.History[0].ChartVersion != v110 || hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionUpgrade {
		t.Fatalf("history %+v action %q", hr.Status.History[0], hr.Status.LastAttemptedReleaseAction)
	}

	// Deleting the HelmRelease uninstalls the release.
	if err := cp.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for exists(t, cm) {
		if time.Now().After(deadline) {
			t.Fatal("deleting the HelmRelease must uninstall its release")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestHelmReleaseBadInputs(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	broken := demoChart("0.1.0")
	broken["templates/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }\n"
	invalid := demoChart("0.2.0")
	invalid["templates/bad.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}_Not_A_DNS_Name\n"
	reg := chartRegistry(t, broken, invalid, demoChart("1.0.0"))
	startEngine(t, engine.Options{})
	good := helmRelease(ns, "good", "demo")
	rejected := helmRelease(ns, "rejected", "invalid")
	missingSource := helmRelease(ns, "no-source", "absent")
	missingValues := helmRelease(ns, "no-values", "demo")
	missingValues.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "nowhere"}}
	badChart := helmRelease(ns, "bad-chart", "broken")
	objs := []client.Object{chartSource(ns, "demo", reg.Host(), "1.0.0"), chartSource(ns, "broken", reg.Host(), "0.1.0"),
		chartSource(ns, "invalid", reg.Host(), "0.2.0"), good, missingSource, missingValues, badChart, rejected}
	for _, o := range objs {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, good, readyIs(good, true), "Ready=True")
	for _, tc := range []struct {
		hr   *helmv2.HelmRelease
		says []string
	}{
		{missingSource, []string{"OCIRepository/" + ns + "/absent", "not found"}},
		{missingValues, []string{"HelmRelease/" + ns + "/no-values", "ConfigMap " + ns + "/nowhere"}},
		// Out of retries, Ready says what helm-controller's says:
		// "Helm install failed for release <ns>/<name> with chart …".
		{badChart, []string{ns + "/bad-chart", "templates/cm.yaml"}},
		{rejected, []string{ns + "/rejected", "rejected_Not_A_DNS_Name"}},
	} {
		// Before its source is ready an object may first wait for it; wait
		// for the failure that is its own.
		waitFor(t, tc.hr, func() bool {
			return readyIs(tc.hr, false)() && containsAll(conditions.GetMessage(tc.hr, meta.ReadyCondition), tc.says)
		}, fmt.Sprintf("Ready=False saying %q", tc.says))
	}
	// A later reconcile of the stalled release (retries exhausted) keeps
	// the cause in Ready's message.
	requestReconcile(t, badChart)
	token := badChart.Annotations[meta.ReconcileRequestAnnotation]
	waitFor(t, badChart, func() bool { return badChart.Status.LastHandledReconcileAt == token }, "lastHandledReconcileAt = requestedAt")
	if msg := conditions.GetMessage(badChart, meta.ReadyCondition); !strings.Contains(msg, "templates/cm.yaml") || !outOfRetries(badChart) {
		t.Fatalf("a stalled release lost its cause on a later reconcile: Ready says %q, Stalled %q", msg, conditions.GetMessage(badChart, meta.StalledCondition))
	}

	// The process stopped after the failed install was recorded and
	// before its status was written: Ready still says the install runs.
	// The next reconcile takes the cause from the failed record.
	conditions.MarkUnknown(rejected, meta.ReadyCondition, meta.ProgressingReason, "Running 'install' action with timeout of 5m0s")
	if err := cp.Client.Status().Update(ctx, rejected); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, rejected)
	token = rejected.Annotations[meta.ReconcileRequestAnnotation]
	waitFor(t, rejected, func() bool { return rejected.Status.LastHandledReconcileAt == token }, "lastHandledReconcileAt = requestedAt")
	if msg := conditions.GetMessage(rejected, meta.ReadyCondition); !strings.Contains(msg, "rejected_Not_A_DNS_Name") ||
		!outOfRetries(rejected) || !readyIs(rejected, false)() {
		t.Fatalf("after a lost status write, a stalled release does not name its cause: Ready says %q, Stalled %q", msg, conditions.GetMessage(rejected, meta.StalledCondition))
	}
}

// outOfRetries tells whether hr is Stalled for want of retries: as
// helm-controller says it (RetriesExceeded, "Failed to install after 1
// attempt(s)") once an action failed, or with Ready's reason when the
// chart did not even render.
func outOfRetries(hr *helmv2.HelmRelease) bool {
	c := conditions.Get(hr, meta.StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == "RetriesExceeded" && c.Message == "Failed to install after 1 attempt(s)" ||
			strings.Contains(c.Message, "retries (0) exhausted"))
}

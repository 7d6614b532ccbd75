package engine_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// A release cozy-aio installs or upgrades from an OCIRepository is one
// helm-controller would find in sync after a switch back (issue #33): the
// chart version carries the artifact's digest (in the record and in the
// rendered .Chart.Version), status.history holds helm-controller's
// snapshots, whose digests verify the records as read from their Secrets,
// and Released and Ready say what helm-controller says. cozy-aio's own
// next reconcile still finds the release in sync.
func TestHelmReleaseWritesWhatHelmControllerWrites(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	d := pushDemoChart(t)
	files, revision, version, ociDigest := d.files, d.revision, d.version, d.ociDigest
	if !regexp.MustCompile(`^1\.0\.0\+[0-9a-f]{12}$`).MatchString(version) {
		t.Fatalf("chart version %q", version)
	}
	chart := chartMetadata(t, files)
	startEngine(t, engine.Options{})
	_, hr := d.createGreenRelease(t, ns)
	waitFor(t, hr, func() bool { return conditions.IsReady(hr) && len(hr.Status.History) > 0 }, "installed")
	green := map[string]any{"color": "green"}
	s := hr.Status.History[0]
	checkSnapshot(t, s, 1, "deployed", helmv2.ReleaseActionInstall, version, ociDigest, green)
	v1 := releaseRecord(t, ns, "app", 1)
	if why := (helm.Adoption{Snapshot: snapshotOfStatus(s), Revision: revision}).OutOfSync(v1, chart, green); why != "" {
		t.Fatalf("helm-controller would upgrade the release cozy-aio installed: %s", why)
	}
	if v1.Chart.Metadata.Version != version {
		t.Fatalf("record's chart version %q, want %q", v1.Chart.Metadata.Version, version)
	}
	st := hr.Status
	if st.LastAttemptedRevision != version || st.LastAttemptedRevisionDigest != ociDigest ||
		st.LastAttemptedConfigDigest != helm.ConfigDigest(green) || st.LastAttemptedReleaseAction != helmv2.ReleaseActionInstall {
		t.Fatalf("last attempted: revision %q digest %q config %q action %q", st.LastAttemptedRevision,
			st.LastAttemptedRevisionDigest, st.LastAttemptedConfigDigest, st.LastAttemptedReleaseAction)
	}
	msg := "Helm install succeeded for release " + ns + "/app.v1 with chart demo@" + version
	for _, c := range []string{helmv2.ReleasedCondition, meta.ReadyCondition} {
		if got := conditions.Get(hr, c); got == nil || got.Reason != helmv2.InstallSucceededReason || got.Message != msg {
			t.Fatalf("%s = %+v, want %s %q", c, got, helmv2.InstallSucceededReason, msg)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-settings"}, cm); err != nil || cm.Data["chart"] != version {
		t.Fatalf("rendered .Chart.Version %q (%v), want %q", cm.Data["chart"], err, version)
	}

	// cozy-aio's own next reconcile: in sync, nothing written.
	secrets := releaseSecrets(t, ns, "app")
	requestReconcile(t, hr)
	token := hr.Annotations[meta.ReconcileRequestAnnotation]
	waitFor(t, hr, func() bool { return hr.Status.LastHandledReconcileAt == token }, "lastHandledReconcileAt = requestedAt")
	if after := releaseSecrets(t, ns, "app"); len(after) != 1 || after[0].ResourceVersion != secrets[0].ResourceVersion {
		t.Fatalf("a reconcile in sync wrote the release: %v, was %v", secretNames(after), secretNames(secrets))
	}
	if !conditions.IsReady(hr) || len(hr.Status.History) != 1 || hr.Status.History[0].Digest != s.Digest {
		t.Fatalf("after a reconcile in sync: Ready %v, history %+v", conditions.IsReady(hr), hr.Status.History)
	}

	// New values: an upgrade, recorded as helm-controller records it.
	patch := client.MergeFrom(hr.DeepCopy())
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"color":"red"}`)}
	if err := cp.Client.Patch(ctx, hr, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hr, func() bool {
		return conditions.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.History[0].Version == 2
	}, "upgrade to revision 2")
	red := map[string]any{"color": "red"}
	if len(hr.Status.History) != 2 {
		t.Fatalf("history after the upgrade: %+v, want 2 entries", hr.Status.History)
	}
	checkSnapshot(t, hr.Status.History[0], 2, "deployed", helmv2.ReleaseActionUpgrade, version, ociDigest, red)
	old := hr.Status.History[1]
	checkSnapshot(t, old, 1, "superseded", "", version, ociDigest, green)
	v1, v2 := releaseRecord(t, ns, "app", 1), releaseRecord(t, ns, "app", 2)
	if old.Digest == s.Digest || old.Digest != helm.RecordDigest(v1, old.OCIDigest) {
		t.Fatalf("superseded entry's digest %s does not verify the superseded record (%s); before %s",
			old.Digest, helm.RecordDigest(v1, old.OCIDigest), s.Digest)
	}
	if why := (helm.Adoption{Snapshot: snapshotOfStatus(hr.Status.History[0]), Revision: revision}).OutOfSync(v2, chart, red); why != "" {
		t.Fatalf("helm-controller would upgrade the release cozy-aio upgraded: %s", why)
	}
	msg = "Helm upgrade succeeded for release " + ns + "/app.v2 with chart demo@" + version
	if got := conditions.Get(hr, helmv2.ReleasedCondition); got == nil || got.Reason != helmv2.UpgradeSucceededReason || got.Message != msg {
		t.Fatalf("Released = %+v, want %q", got, msg)
	}
	if got := conditions.Get(hr, meta.ReadyCondition); got.Reason != helmv2.UpgradeSucceededReason || got.Message != msg {
		t.Fatalf("Ready = %+v, want %q", got, msg)
	}
}

// An OCIRepository artifact whose tag names another version than the
// chart's is refused as helm-controller refuses it: Ready=False
// ChartMutateError, nothing installed.
func TestHelmReleaseChartVersionNotTheTag(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg := chartRegistry(t)
	desc, err := reg.PushChart(ctx, "charts/demo", demoChart("1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := reg.Repository("charts/demo")
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Tag(ctx, desc, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	startEngine(t, engine.Options{})
	src := chartSource(ns, "demo", reg.Host(), "2.0.0")
	hr := helmRelease(ns, "app", "demo")
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hr, func() bool { return conditions.GetReason(hr, meta.ReadyCondition) == engine.ChartMutateErrorReason },
		"Ready=False ChartMutateError")
	if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "does not match chart version 1.0.0") {
		t.Fatalf("Ready message %q", msg)
	}
	if n := len(releaseSecrets(t, ns, "app")); n != 0 {
		t.Fatalf("%d release records, want none", n)
	}
}

// demoChartPushed is demoChart("1.0.0") pushed to a registry of its own
// as charts/demo, with the chart version and OCI digest helm-controller
// records for its artifact.
type demoChartPushed struct {
	reg                          *testenv.Registry
	files                        map[string]string
	revision, version, ociDigest string
}

func pushDemoChart(t *testing.T) demoChartPushed {
	t.Helper()
	d := demoChartPushed{files: demoChart("1.0.0"), reg: chartRegistry(t)}
	desc, err := d.reg.PushChart(context.Background(), "charts/demo", d.files)
	if err != nil {
		t.Fatal(err)
	}
	d.revision = "1.0.0@" + desc.Digest.String()
	if d.version, d.ociDigest, err = helm.ChartVersionWithDigest("1.0.0", d.revision); err != nil {
		t.Fatal(err)
	}
	return d
}

// createGreenRelease creates, in ns, the OCIRepository demo of the
// pushed chart and the HelmRelease app of it with values color: green.
func (d demoChartPushed) createGreenRelease(t *testing.T, ns string) (*sourcev1.OCIRepository, *helmv2.HelmRelease) {
	t.Helper()
	src := chartSource(ns, "demo", d.reg.Host(), "1.0.0")
	hr := helmRelease(ns, "app", "demo")
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"color":"green"}`)}
	for _, o := range []client.Object{src, hr} {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return src, hr
}

func checkSnapshot(t *testing.T, s *helmv2.Snapshot, version int, status string, action helmv2.ReleaseAction, chartVersion, ociDigest string, values map[string]any) {
	t.Helper()
	if s.APIVersion != helm.SnapshotAPIVersion || s.Version != version || s.Status != status || s.Action != action ||
		s.ChartName != "demo" || s.ChartVersion != chartVersion || s.OCIDigest != ociDigest ||
		s.ConfigDigest != helm.ConfigDigest(values) || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(s.Digest) ||
		s.FirstDeployed.IsZero() || s.LastDeployed.IsZero() {
		t.Fatalf("snapshot %+v, want v%d %s action %q demo@%s ociDigest %s config %s", s, version, status, action,
			chartVersion, ociDigest, helm.ConfigDigest(values))
	}
}

// releaseRecord reads a release record from its Secret with Helm's own
// driver, as helm-controller reads it.
func releaseRecord(t *testing.T, ns, name string, version int) *releasev1.Release {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	r, err := driver.NewSecrets(cs.CoreV1().Secrets(ns)).Get("sh.helm.release.v1." + name + ".v" + strconv.Itoa(version))
	if err != nil {
		t.Fatal(err)
	}
	return r.(*releasev1.Release)
}

func chartMetadata(t *testing.T, files map[string]string) *chartv2.Metadata {
	t.Helper()
	var bf []*archive.BufferedFile
	for n, data := range files {
		bf = append(bf, &archive.BufferedFile{Name: n, Data: []byte(data)})
	}
	ch, err := loader.LoadFiles(bf)
	if err != nil {
		t.Fatal(err)
	}
	return ch.Metadata
}

// snapshotOfStatus is a status.history entry as apply/helm takes it.
func snapshotOfStatus(s *helmv2.Snapshot) helm.Snapshot {
	return helm.Snapshot{
		APIVersion: s.APIVersion, Digest: s.Digest, Name: s.Name, Namespace: s.Namespace, Version: s.Version,
		Status: s.Status, Action: string(s.Action), ChartName: s.ChartName, ChartVersion: s.ChartVersion,
		AppVersion: s.AppVersion, ConfigDigest: s.ConfigDigest, OCIDigest: s.OCIDigest,
		FirstDeployed: s.FirstDeployed.Time, LastDeployed: s.LastDeployed.Time,
	}
}

// sourceChartVersion is the version cozy-aio installs chart version base
// from src's artifact as (helm-controller's, with the artifact's digest).
func sourceChartVersion(t *testing.T, src *sourcev1.OCIRepository, base string) string {
	t.Helper()
	if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	if src.Status.Artifact == nil {
		t.Fatalf("OCIRepository %s has no artifact", src.Name)
	}
	v, _, err := helm.ChartVersionWithDigest(base, src.Status.Artifact.Revision)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

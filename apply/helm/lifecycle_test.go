package helm_test

import (
	"errors"
	"fmt"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/cozy-aio/apply/helm"
)

func TestLifecycleFromOCI(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "life", Namespace: ns}
	spec := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("message", "one")}}

	res, err := m.Install(ctx, rel, helm.InstallOptions{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 1 || res.Status != "deployed" || res.Chart != "demo-0.1.0" {
		t.Fatalf("install result %+v", res)
	}
	if msg, _ := configMapMessage(t, ns, "life"); msg != "one" {
		t.Fatalf("message %q after install", msg)
	}
	secs := releaseSecrets(t, ns, "life")
	s1, ok := secs["1"]
	if !ok || s1.Labels["status"] != "deployed" || s1.Labels[helm.LabelHolder] == "" || s1.Labels[helm.LabelDigest] == "" {
		t.Fatalf("release secret v1: %v", s1.Labels)
	}

	// Later layers win.
	spec.Values = append(spec.Values, values("message", "two"))
	res, err = m.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 2 || res.Status != "deployed" {
		t.Fatalf("upgrade result %+v", res)
	}
	if msg, _ := configMapMessage(t, ns, "life"); msg != "two" {
		t.Fatalf("message %q after upgrade", msg)
	}
	secs = releaseSecrets(t, ns, "life")
	if secs["1"].Labels["status"] != "superseded" || secs["2"].Labels["status"] != "deployed" {
		t.Fatalf("statuses after upgrade: v1 %s v2 %s", secs["1"].Labels["status"], secs["2"].Labels["status"])
	}

	res, err = m.Rollback(ctx, rel, helm.RollbackOptions{Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 3 || res.Status != "deployed" {
		t.Fatalf("rollback result %+v", res)
	}
	if msg, _ := configMapMessage(t, ns, "life"); msg != "one" {
		t.Fatalf("message %q after rollback", msg)
	}

	if _, err := m.Uninstall(ctx, rel, helm.UninstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := configMapMessage(t, ns, "life"); ok {
		t.Fatal("ConfigMap is left after uninstall")
	}
	if secs := releaseSecrets(t, ns, "life"); len(secs) != 0 {
		t.Fatalf("%d release secrets left after uninstall", len(secs))
	}
	if _, err := m.Get(ctx, rel); !errors.Is(err, helm.ErrReleaseNotFound) {
		t.Fatalf("Get after uninstall: %v", err)
	}
}

func TestInstallFromTgzWithStorageNamespace(t *testing.T) {
	ctx := testContext(t)
	ns, store := cp.Namespace(t), cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "tgz", Namespace: ns, StorageNamespace: store}
	spec := helm.Spec{Chart: helm.Chart{Path: chartTgz(t, "demo")}}
	out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec}, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Next.Kind != helm.NextDone || out.Release.Status != "deployed" {
		t.Fatalf("outcome %+v", out)
	}
	if msg, _ := configMapMessage(t, ns, "tgz"); msg != "hello" {
		t.Fatalf("message %q: chart defaults not applied", msg)
	}
	if len(releaseSecrets(t, store, "tgz")) != 1 || len(releaseSecrets(t, ns, "tgz")) != 0 {
		t.Fatal("release secret is not in the storage namespace")
	}
	// A second reconcile with the same spec does nothing.
	out, err = m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec}, out.State)
	if err != nil || len(out.Steps) != 0 || out.Release.Revision != 1 {
		t.Fatalf("idempotent reconcile: %+v %v", out, err)
	}
}

func TestHistoryKeepsFiveRevisionsByDefault(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "hist", Namespace: ns}
	var st helm.State
	for i := range 8 {
		out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("message", i)}}}, st)
		if err != nil {
			t.Fatal(err)
		}
		st = out.State
	}
	secs := releaseSecrets(t, ns, "hist")
	if len(secs) != helm.DefaultMaxHistory {
		t.Fatalf("%d revisions kept, want %d", len(secs), helm.DefaultMaxHistory)
	}
	if secs["8"].Labels["status"] != "deployed" {
		t.Fatalf("latest revision: %v", secs["8"].Labels)
	}
}

// TestReconcileWritesHelmControllerRecords: with Chart.Revision the chart
// is installed as helm-controller installs it (the version carries the
// source's digest), and the Outcome carries the records as stored, from
// which a snapshot verifies the record read back from its Secret. The
// digest label, cozy-aio's own in-sync test, does not depend on the
// revision: a release installed before is still up to date.
func TestReconcileWritesHelmControllerRecords(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	const oci = "sha256:9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370"
	withRevision := ociChart("demo")
	withRevision.Revision = "0.1.0@" + oci
	green := values("message", "green")

	// Installed without the revision, then reconciled with it: in sync.
	plain := helm.Release{Name: "plain", Namespace: ns}
	if _, err := m.Reconcile(ctx, plain, helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{green}}}, helm.State{}); err != nil {
		t.Fatal(err)
	}
	out, err := m.Reconcile(ctx, plain, helm.ReconcileOptions{Spec: helm.Spec{Chart: withRevision, Values: []map[string]any{green}}}, helm.State{})
	if err != nil || len(out.Steps) != 0 || len(out.Records) != 0 {
		t.Fatalf("a release installed before Chart.Revision was set: steps %+v records %d (%v), want none", out.Steps, len(out.Records), err)
	}

	rel := helm.Release{Name: "hc", Namespace: ns}
	out, err = m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: withRevision, Values: []map[string]any{green}}}, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	if out.ChartVersion != "0.1.0+9933f58f8bf4" || out.OCIDigest != oci {
		t.Fatalf("chart version %q ociDigest %q", out.ChartVersion, out.OCIDigest)
	}
	if len(out.Records) != 1 || out.Records[0].Action != helm.ActionInstall || out.Records[0].Release.Version != 1 ||
		out.Records[0].Release.Info.Status.String() != "deployed" || out.Records[0].Release.Chart.Metadata.Version != out.ChartVersion {
		t.Fatalf("records %+v", out.Records)
	}
	if a, b := releaseSecrets(t, ns, "hc")["1"].Labels[helm.LabelDigest], releaseSecrets(t, ns, "plain")["1"].Labels[helm.LabelDigest]; a != b {
		t.Fatalf("digest label %q with Chart.Revision, %q without", a, b)
	}
	v1 := storedRecord(t, ns, "hc", 1)
	snap := helm.SnapshotOf(out.Records[0].Release, "install", oci)
	if why := (helm.Adoption{Snapshot: snap, Revision: withRevision.Revision}).OutOfSync(v1, &chartv2.Metadata{Name: "demo", Version: "0.1.0"}, green); why != "" {
		t.Fatalf("the snapshot of the install does not verify its record: %s", why)
	}

	red := values("message", "red")
	out, err = m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: withRevision, Values: []map[string]any{red}}}, out.State)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != 2 || out.Records[0].Action != helm.ActionUpgrade || out.Records[0].Release.Version != 2 ||
		out.Records[1].Release.Version != 1 || out.Records[1].Release.Info.Status.String() != "superseded" {
		t.Fatalf("records after the upgrade %+v", out.Records)
	}
	if got, want := helm.RecordDigest(out.Records[1].Release, oci), helm.RecordDigest(storedRecord(t, ns, "hc", 1), oci); got != want {
		t.Fatalf("superseded record: digest %s, stored record's %s", got, want)
	}
	snap = helm.SnapshotOf(out.Records[0].Release, "upgrade", oci)
	if why := (helm.Adoption{Snapshot: snap, Revision: withRevision.Revision}).OutOfSync(storedRecord(t, ns, "hc", 2), &chartv2.Metadata{Name: "demo", Version: "0.1.0"}, red); why != "" {
		t.Fatalf("the snapshot of the upgrade does not verify its record: %s", why)
	}

	// A revision that names another version is refused before anything is done.
	bad := ociChart("demo")
	bad.Revision = "9.9.9@" + oci
	_, err = m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: bad, Values: []map[string]any{red}}}, out.State)
	var cve *helm.ChartVersionError
	if !errors.As(err, &cve) || cve.Error() != "artifact revision 9.9.9 does not match chart version 0.1.0" {
		t.Fatalf("err %v, want a ChartVersionError", err)
	}
}

// storedRecord reads a release record from its Secret with Helm's driver.
func storedRecord(t *testing.T, ns, name string, version int) *releasev1.Release {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	r, err := driver.NewSecrets(cs.CoreV1().Secrets(ns)).Get(fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version))
	if err != nil {
		t.Fatal(err)
	}
	return r.(*releasev1.Release)
}

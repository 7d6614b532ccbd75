package helm_test

import (
	"errors"
	"testing"

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

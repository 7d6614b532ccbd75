package helm_test

import (
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestUpgradeSettings checks that an upgrade runs with UpgradeSettings,
// not with the install's Spec: the install skips the chart's failing
// pre-install/pre-upgrade hook, and the upgrade, which runs hooks, fails on
// it; an upgrade that skips hooks too succeeds.
func TestUpgradeSettings(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "hook", Namespace: ns}
	opts := helm.ReconcileOptions{
		Spec:            helm.Spec{Chart: ociChart("hook"), Timeout: time.Minute, DisableHooks: true},
		UpgradeSettings: &helm.ActionSettings{Timeout: time.Minute, DisableHooks: true},
	}
	out, err := m.Reconcile(ctx, rel, opts, helm.State{})
	if err != nil || out.Release.Revision != 1 {
		t.Fatalf("install without hooks: %+v %v", out.Release, err)
	}
	opts.Values = []map[string]any{values("x", "1")}
	out, err = m.Reconcile(ctx, rel, opts, out.State)
	if err != nil || out.Release.Revision != 2 {
		t.Fatalf("upgrade without hooks: %+v %v", out.Release, err)
	}
	opts.Values = []map[string]any{values("x", "2")}
	opts.UpgradeSettings.DisableHooks = false
	go failJob(ctx, ns, "hook-pre")
	_, err = m.Reconcile(ctx, rel, opts, out.State)
	mustContain(t, err, "helm upgrade "+ns+"/hook", "pre-upgrade", "hook-pre")
}

// TestRemedyUninstallSettings checks that the uninstall remedying a
// failed install runs with ReconcileOptions.Uninstall (Flux's
// spec.uninstall): keepHistory leaves the release's records, marked
// uninstalled.
func TestRemedyUninstallSettings(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "kept", Namespace: ns}
	opts := helm.ReconcileOptions{
		Spec:      helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("message", "bad", "fail", true)}},
		Install:   helm.Remediation{Retries: 1},
		Uninstall: &helm.UninstallOptions{KeepHistory: true},
	}
	out, err := m.Reconcile(ctx, rel, opts, helm.State{})
	mustContain(t, err, "helm install "+ns+"/kept", "70000")
	if n := len(out.Steps); n != 2 || out.Steps[1].Action != helm.ActionUninstall {
		t.Fatalf("steps %+v", out.Steps)
	}
	secrets := releaseSecrets(t, ns, "kept")
	if s, ok := secrets["1"]; !ok || s.Labels["status"] != "uninstalled" {
		t.Fatalf("keepHistory: release records %v", secrets)
	}
}

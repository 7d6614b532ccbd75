package engine

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestRollbackOptionsAsFlux checks spec.rollback maps onto the remedying
// rollbacks with helm-controller's meanings (timeout defaulting to
// spec.timeout, waits on unless disabled), and that without spec.rollback
// helm-controller's defaults hold, whatever the install and upgrade set
// (its newRollback reads obj.GetRollback(), the zero Rollback).
func TestRollbackOptionsAsFlux(t *testing.T) {
	hr := &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{
		Timeout: &metav1.Duration{Duration: 3 * time.Minute},
		Install: &helmv2.Install{Timeout: &metav1.Duration{Duration: time.Minute}, DisableWait: true,
			DisableWaitForJobs: true, DisableHooks: true},
		Upgrade: &helmv2.Upgrade{Timeout: &metav1.Duration{Duration: time.Minute}, DisableWait: true,
			DisableWaitForJobs: true, DisableHooks: true, Force: true, CleanupOnFail: true},
	}}
	unset := helmOptions(hr, "", nil).Rollback
	defaults := helm.RollbackOptions{Timeout: 3 * time.Minute, Wait: helm.WaitKStatus, WaitForJobs: true, MaxHistory: hr.GetMaxHistory()}
	if unset == nil || *unset != defaults {
		t.Fatalf("without spec.rollback: %+v, want helm-controller's defaults %+v", unset, defaults)
	}
	hr.Spec.Timeout = nil
	if got := helmOptions(hr, "", nil).Rollback; got.Timeout != 5*time.Minute {
		t.Fatalf("without spec.timeout: rollback timeout %s, want Flux's default 5m", got.Timeout)
	}
	hr.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Minute}
	hr.Spec.Rollback = &helmv2.Rollback{DisableWait: true, DisableHooks: true, Force: true, CleanupOnFail: true}
	got := *helmOptions(hr, "", nil).Rollback
	want := helm.RollbackOptions{Timeout: 3 * time.Minute, Wait: helm.WaitNone, WaitForJobs: true, DisableHooks: true,
		Force: true, CleanupOnFail: true, MaxHistory: hr.GetMaxHistory()}
	if got != want {
		t.Fatalf("rollback = %+v, want %+v", got, want)
	}
	hr.Spec.Rollback = &helmv2.Rollback{Timeout: &metav1.Duration{Duration: time.Minute}, DisableWaitForJobs: true}
	if got := helmOptions(hr, "", nil).Rollback; got.Timeout != time.Minute || got.Wait != helm.WaitKStatus || got.WaitForJobs {
		t.Fatalf("rollback = %+v", got)
	}
}

// TestUpgradeSettingsAsFlux checks spec.upgrade's own timeout, waits,
// hooks and schema check reach the upgrades, and spec.install's the
// installs, as helm-controller sets each action from its own block.
func TestUpgradeSettingsAsFlux(t *testing.T) {
	hr := &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{
		Timeout: &metav1.Duration{Duration: 3 * time.Minute},
		Install: &helmv2.Install{DisableWait: true, DisableHooks: true},
		Upgrade: &helmv2.Upgrade{Timeout: &metav1.Duration{Duration: time.Minute}, DisableWaitForJobs: true, DisableSchemaValidation: true},
	}}
	o := helmOptions(hr, "", nil)
	if o.Wait != helm.WaitNone || !o.DisableHooks || o.Timeout != 3*time.Minute || !o.WaitForJobs {
		t.Fatalf("install settings %+v", o.Spec)
	}
	want := helm.ActionSettings{Timeout: time.Minute, Wait: helm.WaitKStatus, DisableSchemaValidation: true}
	if o.UpgradeSettings == nil || *o.UpgradeSettings != want {
		t.Fatalf("upgrade settings %+v, want %+v", o.UpgradeSettings, want)
	}
}

// TestUninstallOptionsAsFlux checks spec.uninstall reaches the uninstalls
// that remedy a failure, with helm-controller's defaults when unset.
func TestUninstallOptionsAsFlux(t *testing.T) {
	hr := &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{Timeout: &metav1.Duration{Duration: 3 * time.Minute}}}
	if got := *helmOptions(hr, "", nil).Uninstall; got != (helm.UninstallOptions{Timeout: 3 * time.Minute, DeletionPropagation: "background"}) {
		t.Fatalf("defaults %+v", got)
	}
	orphan := "orphan"
	hr.Spec.Uninstall = &helmv2.Uninstall{Timeout: &metav1.Duration{Duration: time.Minute}, DisableHooks: true, KeepHistory: true,
		DisableWait: true, DeletionPropagation: &orphan}
	want := helm.UninstallOptions{Timeout: time.Minute, Wait: helm.WaitNone, DisableHooks: true, KeepHistory: true, DeletionPropagation: "orphan"}
	if got := *helmOptions(hr, "", nil).Uninstall; got != want {
		t.Fatalf("uninstall %+v, want %+v", got, want)
	}
}

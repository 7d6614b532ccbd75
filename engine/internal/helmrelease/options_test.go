package helmrelease

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
	unset := reconcileOptions(hr, "", nil).Rollback
	defaults := helm.RollbackOptions{Timeout: 3 * time.Minute, Wait: helm.WaitKStatus, WaitForJobs: true, MaxHistory: hr.GetMaxHistory()}
	if unset == nil || *unset != defaults {
		t.Fatalf("without spec.rollback: %+v, want helm-controller's defaults %+v", unset, defaults)
	}
	hr.Spec.Timeout = nil
	if got := reconcileOptions(hr, "", nil).Rollback; got.Timeout != 5*time.Minute {
		t.Fatalf("without spec.timeout: rollback timeout %s, want Flux's default 5m", got.Timeout)
	}
	hr.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Minute}
	hr.Spec.Rollback = &helmv2.Rollback{DisableWait: true, DisableHooks: true, Force: true, CleanupOnFail: true}
	got := *reconcileOptions(hr, "", nil).Rollback
	want := helm.RollbackOptions{Timeout: 3 * time.Minute, Wait: helm.WaitNone, WaitForJobs: true, DisableHooks: true,
		Force: true, CleanupOnFail: true, MaxHistory: hr.GetMaxHistory()}
	if got != want {
		t.Fatalf("rollback = %+v, want %+v", got, want)
	}
	hr.Spec.Rollback = &helmv2.Rollback{Timeout: &metav1.Duration{Duration: time.Minute}, DisableWaitForJobs: true}
	if got := reconcileOptions(hr, "", nil).Rollback; got.Timeout != time.Minute || got.Wait != helm.WaitKStatus || got.WaitForJobs {
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
	o := reconcileOptions(hr, "", nil)
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
	if got := *reconcileOptions(hr, "", nil).Uninstall; got != (helm.UninstallOptions{Timeout: 3 * time.Minute, DeletionPropagation: "background"}) {
		t.Fatalf("defaults %+v", got)
	}
	orphan := "orphan"
	hr.Spec.Uninstall = &helmv2.Uninstall{Timeout: &metav1.Duration{Duration: time.Minute}, DisableHooks: true, KeepHistory: true,
		DisableWait: true, DeletionPropagation: &orphan}
	want := helm.UninstallOptions{Timeout: time.Minute, Wait: helm.WaitNone, DisableHooks: true, KeepHistory: true, DeletionPropagation: "orphan"}
	if got := *reconcileOptions(hr, "", nil).Uninstall; got != want {
		t.Fatalf("uninstall %+v, want %+v", got, want)
	}
}

// TestEachHelmReleaseFieldReachesItsAction sets one honoured spec field at
// a time to a value other than its default and checks that the options the
// engine gives apply/helm change accordingly: a field the engine stopped
// reading fails here. (What apply/helm does with each option is tested in
// its own package against a real API server.)
func TestEachHelmReleaseFieldReachesItsAction(t *testing.T) {
	yes := true
	for _, c := range []struct {
		field string
		set   func(*helmv2.HelmRelease)
		ok    func(helm.ReconcileOptions) bool
	}{
		{"install.timeout", func(h *helmv2.HelmRelease) { h.Spec.Install.Timeout = &metav1.Duration{Duration: 42 * time.Second} },
			func(o helm.ReconcileOptions) bool { return o.Timeout == 42*time.Second }},
		{"install.disableWaitForJobs", func(h *helmv2.HelmRelease) { h.Spec.Install.DisableWaitForJobs = true },
			func(o helm.ReconcileOptions) bool { return !o.WaitForJobs }},
		{"install.disableSchemaValidation", func(h *helmv2.HelmRelease) { h.Spec.Install.DisableSchemaValidation = true },
			func(o helm.ReconcileOptions) bool { return o.DisableSchemaValidation }},
		{"install.crds", func(h *helmv2.HelmRelease) { h.Spec.Install.CRDs = helmv2.CreateReplace },
			func(o helm.ReconcileOptions) bool { return o.InstallCRDs == helm.CRDCreateReplace }},
		{"install.skipCRDs", func(h *helmv2.HelmRelease) { h.Spec.Install.SkipCRDs = true },
			func(o helm.ReconcileOptions) bool { return o.InstallCRDs == helm.CRDSkip }},
		{"install.createNamespace", func(h *helmv2.HelmRelease) { h.Spec.Install.CreateNamespace = true },
			func(o helm.ReconcileOptions) bool { return o.CreateNamespace }},
		{"install.disableTakeOwnership", func(h *helmv2.HelmRelease) { h.Spec.Install.DisableTakeOwnership = true },
			func(o helm.ReconcileOptions) bool {
				return o.InstallDisableTakeOwnership && !o.UpgradeDisableTakeOwnership
			}},
		{"install.remediation.retries", func(h *helmv2.HelmRelease) { h.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3} },
			func(o helm.ReconcileOptions) bool { return o.Install.Retries == 3 }},
		{"install.remediation.remediateLastFailure", func(h *helmv2.HelmRelease) {
			h.Spec.Install.Remediation = &helmv2.InstallRemediation{RemediateLastFailure: &yes}
		}, func(o helm.ReconcileOptions) bool {
			return o.Install.RemediateLastFailure != nil && *o.Install.RemediateLastFailure
		}},
		{"install.strategy", func(h *helmv2.HelmRelease) {
			h.Spec.Install.Strategy = &helmv2.InstallStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure), RetryInterval: &metav1.Duration{Duration: 7 * time.Second}}
		}, func(o helm.ReconcileOptions) bool {
			return o.Install.Strategy == helm.RetryOnFailure && o.Install.RetryInterval == 7*time.Second
		}},
		{"upgrade.force", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.Force = true },
			func(o helm.ReconcileOptions) bool { return o.Force }},
		{"upgrade.cleanupOnFail", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.CleanupOnFail = true },
			func(o helm.ReconcileOptions) bool { return o.CleanupOnFail }},
		{"upgrade.crds", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.CRDs = helmv2.CreateReplace },
			func(o helm.ReconcileOptions) bool { return o.UpgradeCRDs == helm.CRDCreateReplace }},
		{"upgrade.disableWait", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.DisableWait = true },
			func(o helm.ReconcileOptions) bool {
				return o.UpgradeSettings.Wait == helm.WaitNone && o.Wait == helm.WaitKStatus
			}},
		{"upgrade.disableHooks", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.DisableHooks = true },
			func(o helm.ReconcileOptions) bool { return o.UpgradeSettings.DisableHooks && !o.DisableHooks }},
		{"upgrade.disableTakeOwnership", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.DisableTakeOwnership = true },
			func(o helm.ReconcileOptions) bool {
				return o.UpgradeDisableTakeOwnership && !o.InstallDisableTakeOwnership
			}},
		{"upgrade.preserveValues", func(h *helmv2.HelmRelease) { h.Spec.Upgrade.PreserveValues = true },
			func(o helm.ReconcileOptions) bool { return o.PreserveValues }},
		{"upgrade.strategy", func(h *helmv2.HelmRelease) {
			h.Spec.Upgrade.Strategy = &helmv2.UpgradeStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure)}
		}, func(o helm.ReconcileOptions) bool { return o.Upgrade.Strategy == helm.RetryOnFailure }},
		{"upgrade.remediation.strategy", func(h *helmv2.HelmRelease) {
			s := helmv2.UninstallRemediationStrategy
			h.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1, Strategy: &s}
		}, func(o helm.ReconcileOptions) bool {
			return o.Upgrade.Remedy == helm.ActionUninstall && o.Upgrade.Retries == 1
		}},
		{"upgrade.remediation.ignoreTestFailures", func(h *helmv2.HelmRelease) {
			h.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{IgnoreTestFailures: &yes}
		}, func(o helm.ReconcileOptions) bool {
			return o.Upgrade.IgnoreTestFailures != nil && *o.Upgrade.IgnoreTestFailures
		}},
		{"maxHistory", func(h *helmv2.HelmRelease) { n := 2; h.Spec.MaxHistory = &n },
			func(o helm.ReconcileOptions) bool { return o.MaxHistory == 2 && o.Rollback.MaxHistory == 2 }},
		{"waitStrategy legacy", func(h *helmv2.HelmRelease) {
			h.Spec.WaitStrategy = &helmv2.WaitStrategy{Name: helmv2.WaitStrategyLegacy}
		},
			func(o helm.ReconcileOptions) bool {
				return o.Wait == helm.WaitLegacy && o.UpgradeSettings.Wait == helm.WaitLegacy && o.Rollback.Wait == helm.WaitLegacy && o.Uninstall.Wait == helm.WaitLegacy
			}},
		{"waitStrategy legacy with install.disableWait", func(h *helmv2.HelmRelease) {
			h.Spec.WaitStrategy = &helmv2.WaitStrategy{Name: helmv2.WaitStrategyLegacy}
			h.Spec.Install.DisableWait = true
		}, func(o helm.ReconcileOptions) bool {
			return o.Wait == helm.WaitNone && o.UpgradeSettings.Wait == helm.WaitLegacy
		}},
		{"driftDetection.mode warn", func(h *helmv2.HelmRelease) {
			h.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionWarn}
		}, func(o helm.ReconcileOptions) bool { return o.Drift == helm.DriftDetect }},
	} {
		t.Run(c.field, func(t *testing.T) {
			base := func() *helmv2.HelmRelease {
				return &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{Install: &helmv2.Install{}, Upgrade: &helmv2.Upgrade{}}}
			}
			if c.ok(reconcileOptions(base(), "", nil)) {
				t.Fatalf("the check holds without %s: it tests nothing", c.field)
			}
			hr := base()
			c.set(hr)
			if err := Unsupported(hr); err != nil {
				t.Fatalf("%s is rejected: %v", c.field, err)
			}
			if !c.ok(reconcileOptions(hr, "", nil)) {
				t.Fatalf("%s did not reach the options: %+v", c.field, reconcileOptions(hr, "", nil))
			}
		})
	}
}

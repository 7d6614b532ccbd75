package helm

import "time"

// ActionSettings are the settings Flux sets per action (spec.install and
// spec.upgrade each have their own): the timeout, the waits, the hooks and
// the schema check.
type ActionSettings struct {
	// Timeout bounds the action. Default: DefaultTimeout.
	Timeout time.Duration
	// Wait is how to wait for the objects. Default: WaitKStatus.
	Wait Wait
	// WaitForJobs also waits for Jobs. Default: false.
	WaitForJobs bool
	// DisableHooks skips the chart's hooks. Default: false.
	DisableHooks bool
	// DisableSchemaValidation skips the values schema check. Default:
	// false.
	DisableSchemaValidation bool
}

// with returns s with a's settings.
func (a ActionSettings) with(s Spec) Spec {
	s.Timeout, s.Wait, s.WaitForJobs = a.Timeout, a.Wait, a.WaitForJobs
	s.DisableHooks, s.DisableSchemaValidation = a.DisableHooks, a.DisableSchemaValidation
	return s
}

// upgradeSpec is the Spec of an upgrade: Spec, with the upgrade's own
// settings when they are given.
func (o ReconcileOptions) upgradeSpec() Spec {
	if o.UpgradeSettings == nil {
		return o.Spec
	}
	return o.UpgradeSettings.with(o.Spec)
}

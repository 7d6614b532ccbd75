package helm

import (
	"fmt"
	"time"
)

// Strategy is how failures of an install or upgrade are handled.
type Strategy string

// Strategies.
const (
	// RemediateOnFailure retries up to Retries times, remediating (rolling
	// back or uninstalling) after each failure; the last failure is
	// remediated when RemediateLastFailure says so. Then it stalls until
	// the chart or values change.
	RemediateOnFailure Strategy = "RemediateOnFailure"
	// RetryOnFailure leaves the failed release as it is and retries every
	// RetryInterval, without limit.
	RetryOnFailure Strategy = "RetryOnFailure"
)

// DefaultRetryInterval is the RetryOnFailure interval when none is set.
const DefaultRetryInterval = 5 * time.Minute

// Remediation is the failure policy of install or of upgrade. The zero
// value is RemediateOnFailure with no retries and no remediation of the
// (only, hence last) failure: the failed release is kept for inspection.
type Remediation struct {
	// Strategy. Default: RemediateOnFailure.
	Strategy Strategy
	// Retries is how many attempts follow a first failure
	// (RemediateOnFailure). Negative: no limit. Default: 0.
	Retries int
	// RemediateLastFailure remediates the failure that exhausts the
	// retries. Default: true when Retries > 0, else false.
	RemediateLastFailure *bool
	// Remedy of a failed upgrade: ActionRollback or ActionUninstall.
	// A failed install is always remedied by ActionUninstall.
	// Default: ActionRollback.
	Remedy Action
	// RetryInterval is the wait between attempts (RetryOnFailure).
	// Default: DefaultRetryInterval.
	RetryInterval time.Duration
	// IgnoreTestFailures, when set, overrides TestOptions.IgnoreFailures
	// for the tests of the revisions this action makes (Flux's
	// remediation.ignoreTestFailures). Default: nil, TestOptions decides.
	IgnoreTestFailures *bool
}

func (p Remediation) ignoreTests(def bool) bool {
	if p.IgnoreTestFailures != nil {
		return *p.IgnoreTestFailures
	}
	return def
}

// State is the remediation state of a release. The caller persists it
// (the engine keeps it in HelmRelease status) and passes it back to the
// next Reconcile; the zero value is a release never attempted.
type State struct {
	// Digest identifies the chart version and values the counts refer to
	// (StateDigest); a different desired digest resets the counts.
	Digest string `json:"digest,omitempty"`
	// InstallFailures counts consecutive failed installs of Digest.
	InstallFailures int `json:"installFailures,omitempty"`
	// UpgradeFailures counts consecutive failed upgrades of Digest.
	UpgradeFailures int `json:"upgradeFailures,omitempty"`
	// LastFailure is when the last failure happened.
	LastFailure time.Time `json:"lastFailure,omitzero"`
}

func (s State) failures(a Action) int {
	if a == ActionInstall {
		return s.InstallFailures
	}
	return s.UpgradeFailures
}

// NextKind says what the caller should do after a Reconcile.
type NextKind string

// Next kinds.
const (
	// NextDone: the release is as asked; nothing to do until a change.
	NextDone NextKind = "Done"
	// NextRetry: reconcile again after Next.After.
	NextRetry NextKind = "Retry"
	// NextStalled: retries are exhausted; nothing more happens until the
	// chart or values change.
	NextStalled NextKind = "Stalled"
)

// Next is what should follow.
type Next struct {
	Kind   NextKind
	After  time.Duration
	Reason string
	// Cause, when Reconcile refused an attempt because of earlier
	// failures, is Helm's description of the newest failed revision: the
	// error that the failure counts stand for, which a caller may not
	// have recorded (it stopped before writing it).
	Cause string
}

// Plan is what follows a failed attempt.
type Plan struct {
	// Remedy is ActionRollback, ActionUninstall or ActionNone.
	Remedy Action
	// Next is what the caller does after the remedy.
	Next Next
}

// Admit decides whether an attempt of a (ActionInstall or ActionUpgrade)
// may start now. When it may not, Next says why and what follows.
func Admit(st State, a Action, pol Remediation, now time.Time) (bool, Next) {
	n := st.failures(a)
	if n == 0 {
		return true, Next{}
	}
	if pol.Strategy == RetryOnFailure {
		wait := st.LastFailure.Add(pol.retryInterval()).Sub(now)
		if wait > 0 {
			return false, Next{Kind: NextRetry, After: wait, Reason: fmt.Sprintf("%s failed %d times; retrying in %s", a, n, wait.Round(time.Second))}
		}
		return true, Next{}
	}
	if pol.exhausted(n) {
		return false, Next{Kind: NextStalled, Reason: fmt.Sprintf("%s failed %d times; retries (%d) exhausted", a, n, pol.Retries)}
	}
	return true, Next{}
}

// AfterFailure counts a failed attempt of a (ActionInstall or
// ActionUpgrade) and plans the remedy and what follows.
func AfterFailure(st State, a Action, pol Remediation, now time.Time) (State, Plan) {
	if a == ActionInstall {
		st.InstallFailures++
	} else {
		st.UpgradeFailures++
	}
	st.LastFailure = now
	n := st.failures(a)
	if pol.Strategy == RetryOnFailure {
		iv := pol.retryInterval()
		return st, Plan{Next: Next{Kind: NextRetry, After: iv, Reason: fmt.Sprintf("%s failed %d times; retrying every %s", a, n, iv)}}
	}
	remedy := ActionUninstall
	if a == ActionUpgrade && pol.Remedy != ActionUninstall {
		remedy = ActionRollback
	}
	if !pol.exhausted(n) {
		return st, Plan{Remedy: remedy, Next: Next{Kind: NextRetry, Reason: fmt.Sprintf("%s failed (%d of %s attempts)", a, n, pol.attempts())}}
	}
	reason := fmt.Sprintf("%s failed %d times; retries (%d) exhausted", a, n, pol.Retries)
	if !pol.remediateLast() {
		remedy = ActionNone
	}
	return st, Plan{Remedy: remedy, Next: Next{Kind: NextStalled, Reason: reason}}
}

func (p Remediation) exhausted(failures int) bool {
	return p.Retries >= 0 && failures > p.Retries
}

func (p Remediation) attempts() string {
	if p.Retries < 0 {
		return "unlimited"
	}
	return fmt.Sprint(p.Retries + 1)
}

func (p Remediation) remediateLast() bool {
	if p.RemediateLastFailure != nil {
		return *p.RemediateLastFailure
	}
	return p.Retries > 0
}

func (p Remediation) retryInterval() time.Duration {
	if p.RetryInterval > 0 {
		return p.RetryInterval
	}
	return DefaultRetryInterval
}

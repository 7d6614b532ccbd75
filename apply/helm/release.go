package helm

import (
	"errors"
	"fmt"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Release names a Helm release and the identity that acts on it.
type Release struct {
	// Name is the release name. Required.
	Name string
	// Namespace is where the release's objects go. Default: "default".
	Namespace string
	// StorageNamespace is where Helm's release Secrets are kept.
	// Default: Namespace.
	StorageNamespace string
	// ServiceAccount, when set, is impersonated for every request of the
	// action (system:serviceaccount:<Namespace>:<ServiceAccount>), release
	// storage included. Default: the process's own identity.
	ServiceAccount string
	// ServiceAccountNamespace is the namespace of ServiceAccount.
	// Default: Namespace.
	ServiceAccountNamespace string
}

func (r Release) namespace() string {
	if r.Namespace == "" {
		return "default"
	}
	return r.Namespace
}

func (r Release) storageNamespace() string {
	if r.StorageNamespace == "" {
		return r.namespace()
	}
	return r.StorageNamespace
}

func (r Release) impersonate() string {
	if r.ServiceAccount == "" {
		return ""
	}
	ns := r.ServiceAccountNamespace
	if ns == "" {
		ns = r.namespace()
	}
	return "system:serviceaccount:" + ns + ":" + r.ServiceAccount
}

// String is the release's identity, storageNamespace/name: the key of its
// history and of its per-release lock.
func (r Release) String() string { return r.storageNamespace() + "/" + r.Name }

// Action is what was done, or is to be done, to a release.
type Action string

// Actions.
const (
	ActionNone      Action = ""
	ActionInstall   Action = "install"
	ActionUpgrade   Action = "upgrade"
	ActionRollback  Action = "rollback"
	ActionUninstall Action = "uninstall"
	ActionTest      Action = "test"
	// ActionRecover marks a pending release of a dead holder as failed.
	ActionRecover Action = "recover"
	// ActionCorrectDrift re-applies drifted objects of the deployed release.
	ActionCorrectDrift Action = "correct-drift"
)

// Result describes one action and the release revision it left.
type Result struct {
	// Action is what was done.
	Action Action
	// Revision is the release revision after the action; 0 when none is left.
	Revision int
	// Status is Helm's release status after the action, such as "deployed"
	// or "failed"; "" when no release is left.
	Status string
	// Chart is name-version of the release's chart.
	Chart string
	// Description is Helm's description of the revision.
	Description string
	// Tests are the last runs of the revision's test hooks by name; nil
	// when the chart has none.
	Tests map[string]HookRun
	// FirstDeployed and LastDeployed are when Helm recorded the release
	// first and this revision last deployed; zero when unknown.
	FirstDeployed, LastDeployed time.Time
	// Remedied, for a rollback or an uninstall that remedied a failed
	// install, upgrade or test, is the revision it acted on: the revision
	// rolled back to, or the failed revision uninstalled; RemediedChart is
	// that revision's chart (name-version). 0 for every other step.
	Remedied      int
	RemediedChart string
	// Err is the error of a remedy that failed; nil otherwise.
	Err error
}

func resultOf(a Action, rel *releasev1.Release) Result {
	r := Result{Action: a}
	if rel == nil {
		return r
	}
	r.Revision = rel.Version
	r.Tests = testsOf(rel)
	if rel.Info != nil {
		r.Status = rel.Info.Status.String()
		r.Description = rel.Info.Description
		r.FirstDeployed, r.LastDeployed = rel.Info.FirstDeployed, rel.Info.LastDeployed
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		r.Chart = rel.Chart.Metadata.Name + "-" + rel.Chart.Metadata.Version
	}
	return r
}

// Error is the error of an action on a release: it names the release, the
// action and the cause.
type Error struct {
	// Release is storageNamespace/name.
	Release string
	// Action is the action that failed.
	Action Action
	// Err is the cause.
	Err error
}

func (e *Error) Error() string {
	a := e.Action
	if a == ActionNone {
		a = "reconcile"
	}
	return fmt.Sprintf("helm %s %s: %v", a, e.Release, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func wrap(rel Release, a Action, err error) error {
	if err == nil {
		return nil
	}
	var he *Error
	if errors.As(err, &he) && he.Release == rel.String() {
		return err
	}
	return &Error{Release: rel.String(), Action: a, Err: err}
}

var (
	// ErrChartNotFound means the chart file, OCI repository or version does
	// not exist. Retrying does not help until the source changes.
	ErrChartNotFound = errors.New("chart not found")
	// ErrReleaseNotFound means the release has no history.
	ErrReleaseNotFound = errors.New("release not found")
	// ErrPanic means Helm panicked; the panic was recovered.
	ErrPanic = errors.New("helm panicked")
	// ErrRecordConflict means a write of a release record was refused
	// because the record changed (or appeared, or went) since this process
	// read it: another holder has taken the release over. The action wrote
	// nothing further to the release's records; the new holder owns them.
	ErrRecordConflict = errors.New("the release record changed since this process read it: another holder has taken over")
)

// RecordTooLargeError means a release record (a Helm release Secret)
// decompresses past Options.MaxReleaseRecordBytes, or its payload alone
// is larger. The record is not read, so neither is the release's history:
// every action on the release fails with this error, and writes nothing,
// until the Secret is replaced or deleted. It has no cause to unwrap.
type RecordTooLargeError struct {
	// Secret is the Secret's namespace/name.
	Secret string
	// Limit is the limit it passes, in bytes.
	Limit int64
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("release record Secret %s decompresses past %d bytes (Options.MaxReleaseRecordBytes): it is not read, and the release is left alone until the Secret is replaced or deleted",
		e.Secret, e.Limit)
}

// HeldError means a pending release is held by another live holder, so it
// must not be recovered by this process.
type HeldError struct {
	// Holder is the holder recorded on the pending release.
	Holder Holder
	// Status is the pending status.
	Status string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("release is %s, held by live holder %s", e.Status, e.Holder)
}

func isPending(s rcommon.Status) bool { return s.IsPending() }

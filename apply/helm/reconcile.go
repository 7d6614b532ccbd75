package helm

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/ssa/jsondiff"

	"github.com/cozystack/cozy-aio/plan"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// ReconcileOptions configures Reconcile. The zero value of each field is
// its default.
type ReconcileOptions struct {
	Spec
	// InstallCRDs is the CRD policy of an install. Default: CRDCreate.
	InstallCRDs CRDPolicy
	// UpgradeCRDs is the CRD policy of an upgrade. Default: CRDSkip.
	UpgradeCRDs CRDPolicy
	// CreateNamespace creates the release namespace on install.
	// Default: false.
	CreateNamespace bool
	// InstallDisableTakeOwnership and UpgradeDisableTakeOwnership refuse
	// existing objects the release does not own, on install and on
	// upgrade (see InstallOptions.DisableTakeOwnership). Default: false,
	// they are adopted, as helm-controller does.
	InstallDisableTakeOwnership, UpgradeDisableTakeOwnership bool
	// CleanupOnFail deletes objects created by a failed upgrade.
	// Default: false.
	CleanupOnFail bool
	// Force replaces objects that cannot be patched on upgrade.
	// Default: false.
	Force bool
	// PreserveValues makes an upgrade reuse the values of the last
	// release, merged under Spec.Values (Helm's --reuse-values). Default:
	// false, the values are Spec.Values alone.
	PreserveValues bool
	// Rollback, when set, are the settings of the rollbacks that remedy a
	// failure (spec.rollback). Default: the timeout, wait and hooks of Spec.
	Rollback *RollbackOptions
	// Install is the failure policy of installs.
	Install Remediation
	// Upgrade is the failure policy of upgrades.
	Upgrade Remediation
	// Drift is what to do about drift of an up-to-date release.
	// Default: DriftDisabled.
	Drift DriftMode
	// Starting, when set, is called just before an install, an upgrade or
	// a remedy of a failure starts, with the action and its timeout, so
	// that the caller can say what is running. It runs on the caller's
	// goroutine and must not block. Default: nil.
	Starting func(a Action, timeout time.Duration)
	// DriftIgnore are the JSON pointers drift detection leaves alone
	// (see DriftOptions.Ignore). Default: none.
	DriftIgnore []jsondiff.IgnoreRule
	// Uninstall, when set, are the settings of the uninstalls that remedy
	// a failure (Flux's spec.uninstall). Default: nil, the timeout, wait
	// and hooks of the remedying rollbacks.
	Uninstall *UninstallOptions
	// UpgradeSettings, when set, replace Spec's timeout, waits, hooks and
	// schema check for upgrades (Flux's spec.upgrade has its own). Default:
	// nil, Spec's for installs and upgrades alike.
	UpgradeSettings *ActionSettings
	// Known, when set, is the caller's record of the latest revision (a
	// HelmRelease's status.history[0]). When the Cache's watch of the
	// records' labels says that revision is still the latest, deployed,
	// and made of the chart and values asked (the digest label), the
	// release is confirmed up to date from memory: no record is read and
	// Outcome.Release is Known. Not with Test or Drift, which need the
	// record, nor for a release applied as a service account. Default:
	// nil, the records are read.
	Known *Result
	// Adopt, when set, is helm-controller's record of the latest revision,
	// for a release it made: a latest record without this package's digest
	// label that Adopt says is up to date (Adoption.OutOfSync is "") is
	// left as it is, with nothing written to it, and Outcome.Adopted is
	// set. With Test, its tests are handled as an up-to-date revision's:
	// run (and written to the record, as helm-controller writes them) only
	// when the selected hooks never ran. Default: nil, such a release is
	// upgraded.
	Adopt *Adoption
	// Preview, when set, plans each install and upgrade before it runs,
	// and may hold it (see Preview). Default: nil, no plans.
	Preview *Preview
	// Test, when set, runs the test hooks after a successful install or
	// upgrade, and on an up-to-date deployed revision whose selected hooks
	// have not run. A failed test is a failure of the action that made the
	// revision, counted and remedied by its policy, unless
	// Test.IgnoreFailures. Default: nil, no tests.
	Test *TestOptions
}

// Outcome is what Reconcile did and what should follow.
type Outcome struct {
	// Steps are the actions done, in order: a recovery and its remedy,
	// an install or upgrade, a remedy of its failure, a drift correction.
	Steps []Result
	// Release is the latest revision after the call; Revision 0 when the
	// release has none.
	Release Result
	// State is the remediation state to persist and pass back next time.
	State State
	// Next says what the caller should do. After is a minimum wait; 0
	// means no wait is required beyond the caller's own backoff.
	Next Next
	// Drift lists the drifted objects found (Drift not disabled).
	Drift []DriftedObject
	// Test is the outcome of the test hooks when this call ran them;
	// nil when it did not.
	Test *TestReport
	// Adopted is true when the latest revision is helm-controller's and
	// ReconcileOptions.Adopt found it up to date: nothing was written,
	// and helm-controller's snapshot still describes the revision.
	Adopted bool
	// Records are the release records the call wrote, in the order of the
	// actions that wrote them, each as stored by its last write in that
	// action: what a history of the release (SnapshotOf) is made from.
	Records []Record
	// Stored are the release's records as stored when the call ended,
	// newest first, as Helm's storage decodes them; nil when the call
	// read none (the release was found up to date from the cache), so
	// that a history kept from Records can be checked against them.
	Stored []*releasev1.Release
	// ChartVersion is the version the chart is installed as (with the
	// digest of Chart.Revision, see ChartVersionWithDigest), and OCIDigest
	// the source digest that came with it; "" when the chart was not
	// loaded.
	ChartVersion, OCIDigest string
	// Plan is the plan of the install or upgrade this call planned
	// (ReconcileOptions.Preview); nil when it planned none.
	Plan *plan.Plan
}

// Reconcile brings a release to the Spec: it recovers a pending revision
// of a dead holder, installs or upgrades when the chart or values differ
// from the latest revision (or the latest revision is not deployed), and
// remediates a failure by policy, all under the release's lock. It
// returns the action's error, if any, with the Outcome.
//
// "has no deployed releases" cannot happen: a release without a deployed
// revision is installed again over its failed history.
func (m *Manager) Reconcile(ctx context.Context, rel Release, o ReconcileOptions, st State) (Outcome, error) {
	out, err := locked(ctx, m, rel, ActionNone, func() (Outcome, error) {
		out := Outcome{State: st}
		if m.upToDate(ctx, rel, o, &out) {
			return out, nil
		}
		s, err := m.newSession(ctx, rel, maxHistory(o.MaxHistory))
		if err != nil {
			return out, wrap(rel, ActionNone, err)
		}
		s.useChecker(o.HealthChecker)
		err = s.reconcile(o, &out)
		if h, herr := s.history(); herr == nil {
			out.Release, out.Stored = resultOf(ActionNone, h.latest()), h
		} else {
			out.Release = resultOf(ActionNone, nil)
		}
		out.Records = s.written.records
		return out, err
	})
	if out.State == (State{}) {
		out.State = st // ctx ended first: the state is unchanged
	}
	if out.Next.Kind == "" && err != nil {
		out.Next = Next{Kind: NextRetry, Reason: err.Error()}
	}
	return out, err
}

// upToDate confirms from the Cache that o.Known is still the latest
// revision, deployed, of o.Spec's chart and values, and then fills out
// as the records would (see ReconcileOptions.Known).
func (m *Manager) upToDate(ctx context.Context, rel Release, o ReconcileOptions, out *Outcome) bool {
	k := o.Known
	if k == nil || k.Status != rcommon.StatusDeployed.String() || o.Test != nil || o.Drift != DriftDisabled ||
		rel.impersonate() != "" || m.opts.Cache == nil {
		return false
	}
	latest, ok := m.opts.Cache.latestRecord(rel.storageNamespace(), rel.Name)
	if !ok || latest.version != k.Revision || latest.status != k.Status {
		return false
	}
	p, err := m.prepare(ctx, o.Spec)
	if err != nil || latest.digest != p.digest {
		return false
	}
	p.describe(out)
	if out.State.Digest != p.state {
		out.State = State{Digest: p.state}
	}
	out.State.InstallFailures, out.State.UpgradeFailures = 0, 0
	out.Next = Next{Kind: NextDone, Reason: "release is up to date"}
	out.Release = *k
	out.Release.Action = ActionNone
	return true
}

func (s *session) reconcile(o ReconcileOptions, out *Outcome) error {
	steps, err := s.recoverPending(o.remedy())
	out.Steps = append(out.Steps, steps...)
	if err != nil {
		return err
	}
	p, err := s.m.prepare(s.ctx, o.Spec)
	if err != nil {
		return wrap(s.rel, ActionNone, err)
	}
	p.describe(out)
	if out.State.Digest != p.state {
		out.State = State{Digest: p.state}
	}
	h, err := s.history()
	if err != nil {
		return wrap(s.rel, ActionNone, err)
	}
	a := ActionUpgrade
	pol := o.Upgrade
	latest := h.latest()
	switch st := statusOf(latest); {
	case latest == nil, st == rcommon.StatusUninstalled:
		a, pol = ActionInstall, o.Install
	case h.deployed() == nil && (st == rcommon.StatusFailed || st == rcommon.StatusSuperseded) && out.State.InstallFailures == 0:
		// No revision was ever deployed, the latest failed (a pending
		// one unlocked, or a failed install whose count a spec change
		// reset): helm-controller releases it again with an upgrade,
		// which Helm allows over a failed revision, and so does this.
	case h.deployed() == nil:
		a, pol = ActionInstall, o.Install
	case st == rcommon.StatusDeployed && (latest.Labels[LabelDigest] == p.digest || latest.Labels[LabelDigest] == "" && o.adopts(latest, p)):
		// Up to date: a revision of ours, or another engine's record
		// (helm-controller's) in sync, adopted and left as it is. Its
		// tests are handled alike: run only if the selected hooks never
		// ran, as helm-controller runs them.
		out.Adopted = latest.Labels[LabelDigest] == ""
		stop, upgrade, err := s.testDeployed(o, latest, out)
		if stop {
			return err
		}
		if !upgrade {
			out.State.InstallFailures, out.State.UpgradeFailures = 0, 0
			out.Next = Next{Kind: NextDone, Reason: "release is up to date"}
			return s.reconcileDrift(o.Drift, o.DriftIgnore, out)
		}
		out.Adopted = false
	}
	now := s.m.opts.Now()
	if ok, next := Admit(out.State, a, pol, now); !ok {
		next.Cause = h.failure()
		out.Next = next
		return nil
	}
	spec := o.Spec
	if a == ActionUpgrade {
		spec = o.upgradeSpec()
	}
	io, uo := o.actionOptions(spec)
	var res Result
	ps := s.newPlanStep(o.Preview, a, io, uo, p, h, out)
	if ps != nil {
		if err := ps.before(); err != nil {
			if errors.Is(err, ErrHeld) {
				out.Next = Next{Kind: NextHeld, Reason: err.Error()}
				return err
			}
			// No plan, no action: it fails as the action would have
			// (a render error, an unreachable cluster), counted and
			// remedied alike.
			res = resultOf(a, nil)
			if a == ActionUpgrade {
				res = resultOf(a, h.latest())
			}
			err = wrap(s.rel, a, err)
			out.Steps = append(out.Steps, res)
			return s.failure(o, a, pol, err, out)
		}
	}
	o.starting(a, spec.timeout())
	s.planning = ps
	if a == ActionInstall {
		r, ierr := s.install(io, p)
		res, err = resultOf(a, r), ierr
	} else {
		r, uerr := s.upgrade(uo, p)
		res, err = resultOf(a, r), uerr
	}
	s.planning = nil
	if errors.Is(err, ErrHeld) {
		// Held by the plan of the action's own render: nothing written.
		out.Next = Next{Kind: NextHeld, Reason: err.Error()}
		return err
	}
	out.Steps = append(out.Steps, res)
	if err == nil && o.Test != nil {
		if err = s.runTests(o, pol, out); err != nil && !isTestError(err) {
			return err // not a verdict on the revision: tested again next time
		}
	}
	if err == nil {
		out.State.InstallFailures, out.State.UpgradeFailures = 0, 0
		out.Next = Next{Kind: NextDone, Reason: string(a) + " succeeded"}
		return nil
	}
	if s.records.stopped() != nil {
		// Another holder has the release (or the fence refused): neither
		// a failure of this process to count nor one for it to remedy.
		return err
	}
	return s.failure(o, a, pol, err, out)
}

// actionOptions are the options of the install and of the upgrade that
// reconciling to o runs, with spec.
func (o ReconcileOptions) actionOptions(spec Spec) (InstallOptions, UpgradeOptions) {
	return InstallOptions{Spec: spec, CRDs: o.InstallCRDs, CreateNamespace: o.CreateNamespace,
			DisableTakeOwnership: o.InstallDisableTakeOwnership},
		UpgradeOptions{Spec: spec, CRDs: o.UpgradeCRDs, CleanupOnFail: o.CleanupOnFail, Force: o.Force, PreserveValues: o.PreserveValues,
			DisableTakeOwnership: o.UpgradeDisableTakeOwnership}
}

// Plan returns the plan of the install or upgrade that reconciling rel
// to o would run now, made as Reconcile makes it (Preview), without
// running it: nothing is written. Nil when the latest revision is
// deployed and made of o's chart and values.
func (m *Manager) Plan(ctx context.Context, rel Release, o ReconcileOptions) (*plan.Plan, error) {
	return locked(ctx, m, rel, ActionNone, func() (*plan.Plan, error) {
		s, err := m.newSession(ctx, rel, maxHistory(o.MaxHistory))
		if err != nil {
			return nil, wrap(rel, ActionNone, err)
		}
		p, err := m.prepare(ctx, o.Spec)
		if err != nil {
			return nil, wrap(rel, ActionNone, err)
		}
		h, err := s.history()
		if err != nil {
			return nil, wrap(rel, ActionNone, err)
		}
		a, spec := ActionUpgrade, o.upgradeSpec()
		latest := h.latest()
		switch st := statusOf(latest); {
		case latest == nil, st == rcommon.StatusUninstalled,
			h.deployed() == nil && st != rcommon.StatusFailed && st != rcommon.StatusSuperseded:
			a, spec = ActionInstall, o.Spec
		case st == rcommon.StatusDeployed && latest.Labels[LabelDigest] == p.digest:
			return nil, nil
		}
		io, uo := o.actionOptions(spec)
		var out Outcome
		if err := s.newPlanStep(&Preview{}, a, io, uo, p, h, &out).renderAndPlan(); err != nil {
			return nil, wrap(rel, a, err)
		}
		return out.Plan, nil
	})
}

// failure counts a failed attempt of a (or a failed test of the revision
// it made), plans by pol and remedies.
func (s *session) failure(o ReconcileOptions, a Action, pol Remediation, err error, out *Outcome) error {
	var next Plan
	out.State, next = AfterFailure(out.State, a, pol, s.m.opts.Now())
	out.Next = next.Next
	if next.Remedy == ActionNone {
		return err
	}
	h, herr := s.history()
	if herr != nil {
		return errors.Join(err, wrap(s.rel, next.Remedy, herr))
	}
	if statusOf(h.latest()) != rcommon.StatusFailed && !isTestError(err) {
		return err // the failure stored no revision: nothing to remedy
	}
	ro := o.remedy()
	o.starting(next.Remedy, timeoutOr(ro.Timeout))
	r, ra, rerr := s.remedy(h, next.Remedy, ro, o.Uninstall)
	res := resultOf(ra, r)
	subject := h.latest()
	if ra == ActionRollback {
		subject = goodRevision(h)
	}
	if subject != nil {
		res.Remedied, res.RemediedChart = subject.Version, resultOf(ra, subject).Chart
	}
	res.Err = rerr
	out.Steps = append(out.Steps, res)
	return errors.Join(err, rerr)
}

// adopts tells whether latest, a record another writer made, is up to
// date by o.Adopt.
func (o ReconcileOptions) adopts(latest *releasev1.Release, p prepared) bool {
	if o.Adopt == nil || p.chart == nil {
		return false
	}
	return o.Adopt.OutOfSync(latest, p.chart.Metadata, p.values) == ""
}

func (o ReconcileOptions) starting(a Action, timeout time.Duration) {
	if o.Starting != nil {
		o.Starting(a, timeout)
	}
}

func (s *session) reconcileDrift(mode DriftMode, ignore []jsondiff.IgnoreRule, out *Outcome) error {
	if mode == DriftDisabled {
		return nil
	}
	d, err := s.drift(mode == DriftCorrect, ignore)
	out.Drift = d
	if mode == DriftCorrect && len(d) > 0 && err == nil {
		out.Steps = append(out.Steps, Result{Action: ActionCorrectDrift, Revision: out.Release.Revision})
	}
	return err
}

// remedy returns the settings of a remedying rollback.
func (o ReconcileOptions) remedy() RollbackOptions {
	r := remedyOptions(o.Spec)
	if o.Rollback == nil {
		return r
	}
	rb := *o.Rollback
	if rb.MaxHistory == 0 {
		rb.MaxHistory = r.MaxHistory
	}
	return rb
}

package helm

import (
	"fmt"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

var errNoDeployed = driver.ErrNoDeployedReleases

// HolderDead decides whether the holder recorded on a pending revision is
// gone, so that the revision is a leftover and not an action in flight.
// It is called only under the release's in-process lock, so no action of
// this process is in flight on the release. recorded is dead when:
//   - it has no ID: the revision was written by another tool (the helm
//     CLI, Flux) that this process replaces;
//   - it has this process's ID and an earlier or equal start time: an older
//     incarnation of this process, or this very one, whose action can no
//     longer be running since the lock is free;
//   - it has another ID and alive is nil or says it is not alive.
//
// A holder with this process's ID and a later start time is a newer
// incarnation: this process is the stale one and must not touch it.
func HolderDead(recorded, self Holder, alive func(Holder) bool) bool {
	switch {
	case recorded.ID == "":
		return true
	case recorded.ID == labelValue(self.ID):
		return !recorded.Start.After(self.Start)
	case alive == nil:
		return true
	default:
		return !alive(recorded)
	}
}

// remedyOptions are the rollback or uninstall settings of a remedy.
func remedyOptions(s Spec) RollbackOptions {
	return RollbackOptions{Timeout: s.Timeout, Wait: s.Wait, WaitForJobs: s.WaitForJobs, DisableHooks: s.DisableHooks, MaxHistory: s.MaxHistory}
}

// recoverPending finds a pending latest revision. When its holder is dead
// it marks the revision failed and remediates it: a rollback to the last
// deployed (or superseded) revision, or an uninstall when there is none.
// A revision with no holder (another tool's) is only marked failed, as
// helm-controller unlocks one. When the holder is alive it returns a
// *HeldError.
func (s *session) recoverPending(o RollbackOptions) ([]Result, error) {
	h, err := s.history()
	if err != nil {
		// Not the recovery's error: every action reads the history
		// first, and no pending revision was found to recover.
		return nil, wrap(s.rel, ActionNone, err)
	}
	latest := h.latest()
	if latest == nil || !isPending(statusOf(latest)) {
		return nil, nil
	}
	holder := holderOf(latest)
	if !HolderDead(holder, s.m.opts.Holder, s.m.opts.HolderAlive) {
		return nil, wrap(s.rel, ActionRecover, &HeldError{Holder: holder, Status: statusOf(latest).String()})
	}
	was := statusOf(latest)
	// Another tool's leftover (Flux's helm-controller, the helm CLI) is
	// unlocked as helm-controller unlocks it, with its description and no
	// remedy: the action then proceeds from the failed revision as
	// helm-controller's would (no failure counted for it).
	foreign := holder.ID == ""
	desc := fmt.Sprintf("%s recovered: holder %s is gone", was, holder)
	if foreign {
		desc = fmt.Sprintf("Release unlocked from stale '%s' state", was)
	}
	latest.SetStatus(rcommon.StatusFailed, desc)
	if err := s.step(ActionRecover, func() error { return s.cfg.Releases.Update(latest) }); err != nil {
		return nil, err
	}
	steps := []Result{resultOf(ActionRecover, latest)}
	if foreign {
		return steps, nil
	}
	r, a, err := s.remedy(h, ActionRollback, o, nil)
	steps = append(steps, resultOf(a, r))
	return steps, err
}

// goodRevision is the newest revision before the latest that was deployed
// (deployed or superseded): what a rollback returns to; nil when none.
func goodRevision(h history) *releasev1.Release {
	for _, r := range h[1:] {
		if st := statusOf(r); st == rcommon.StatusDeployed || st == rcommon.StatusSuperseded {
			return r
		}
	}
	return nil
}

// remedy rolls back to the newest good revision, or uninstalls when the
// remedy is an uninstall or there is no good revision: with un, or else
// with the rollback's timeout, wait and hooks.
func (s *session) remedy(h history, want Action, o RollbackOptions, un *UninstallOptions) (*releasev1.Release, Action, error) {
	if target := goodRevision(h); want == ActionRollback && target != nil {
		o.Revision = target.Version
		r, err := s.rollback(o)
		return r, ActionRollback, err
	}
	uo := UninstallOptions{Timeout: o.Timeout, Wait: o.Wait, DisableHooks: o.DisableHooks}
	if un != nil {
		uo = *un
	}
	r, err := s.uninstall(uo)
	return r, ActionUninstall, err
}

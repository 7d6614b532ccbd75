package helmrelease

import (
	"fmt"
	"slices"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// historyAfter is status.history after the actions that wrote recs, as
// helm-controller keeps it, so that it verifies the records cozy-aio
// wrote (a switch back to helm-controller upgrades nothing):
//
//   - an install clears the history and puts a snapshot of its revision,
//     with ociDigest and action install, first;
//   - an upgrade puts its revision first likewise (action upgrade), and
//     refreshes the entry of each other revision it wrote (the one it
//     superseded) from that record: its digest recomputed, its ociDigest
//     and test runs kept, no action;
//   - a remedying rollback marks the entries of the records it wrote
//     rollback and puts the revision it made first, with neither action
//     nor ociDigest;
//   - a remedying uninstall marks its entries uninstall-remediation;
//   - a test refreshes its revision's entry with the runs of its test
//     hooks; a recovery of a pending revision refreshes it without them.
//
// Each refreshed entry keeps the action it had unless said otherwise.
func historyAfter(h helmv2.Snapshots, recs []helm.Record, ociDigest string) helmv2.Snapshots {
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].Action == recs[i].Action {
			j++
		}
		h = afterStep(h, recs[i].Action, recs[i:j], ociDigest)
		i = j
	}
	return h
}

func afterStep(h helmv2.Snapshots, a helm.Action, recs []helm.Record, ociDigest string) helmv2.Snapshots {
	switch a {
	case helm.ActionInstall, helm.ActionUpgrade:
		if a == helm.ActionInstall {
			h = nil
		}
		top := 0
		for i, r := range recs {
			if r.Release.Version > recs[top].Release.Version {
				top = i
			}
		}
		for i, r := range recs {
			if i != top {
				refresh(h, r, func(old *helmv2.Snapshot, s *helmv2.Snapshot) { s.TestHooks = old.TestHooks })
			}
		}
		return append(helmv2.Snapshots{snapshotTo(helm.SnapshotOf(recs[top].Release, string(a), ociDigest))}, h...)
	case helm.ActionRollback:
		for _, r := range recs {
			if !refresh(h, r, func(old *helmv2.Snapshot, s *helmv2.Snapshot) {
				s.Action, s.TestHooks = helmv2.ReleaseActionRollback, old.TestHooks
			}) {
				h = append(helmv2.Snapshots{snapshotTo(helm.SnapshotOf(r.Release, "", ""))}, h...)
			}
		}
	case helm.ActionUninstall:
		for _, r := range recs {
			refresh(h, r, func(old *helmv2.Snapshot, s *helmv2.Snapshot) {
				s.Action, s.TestHooks = helmv2.ReleaseActionUninstallRemediation, old.TestHooks
			})
		}
	case helm.ActionTest:
		for _, r := range recs {
			refresh(h, r, func(old *helmv2.Snapshot, s *helmv2.Snapshot) {
				s.Action, s.TestHooks = old.Action, testHooksTo(helm.TestHooksOf(r.Release))
			})
		}
	case helm.ActionRecover:
		for _, r := range recs {
			refresh(h, r, func(old *helmv2.Snapshot, s *helmv2.Snapshot) { s.Action = old.Action })
		}
	default:
		for _, r := range recs {
			refresh(h, r, func(old *helmv2.Snapshot, s *helmv2.Snapshot) { s.Action, s.TestHooks = old.Action, old.TestHooks })
		}
	}
	return h
}

// alignHistory makes h agree with the release's records as stored (newest
// first): an entry whose record changed since it was taken (a write whose
// status update was lost to a crash, a revision another action
// superseded) is taken again from it, keeping its action, test runs and
// ociDigest; the newest stored revision, when no entry has it, is added
// without an action, as helm-controller observes a release it did not
// make; entries stay newest first. Entries of revisions no longer stored
// stay, as in helm-controller.
func alignHistory(h helmv2.Snapshots, stored []*releasev1.Release) helmv2.Snapshots {
	if len(stored) == 0 || stored[0] == nil {
		return h
	}
	byVersion := make(map[int]*releasev1.Release, len(stored))
	for _, r := range stored {
		byVersion[r.Version] = r
	}
	latest, seen := stored[0], false
	for i, old := range h {
		if old == nil || old.Name != latest.Name || old.Namespace != latest.Namespace {
			continue
		}
		seen = seen || old.Version == latest.Version
		r := byVersion[old.Version]
		if r == nil {
			continue
		}
		s := snapshotTo(helm.SnapshotOf(r, "", old.OCIDigest))
		if s.Digest == old.Digest && s.Status == old.Status {
			continue
		}
		s.Action, s.TestHooks = old.Action, old.TestHooks
		h[i] = s
	}
	if !seen {
		h = append(h, snapshotTo(helm.SnapshotOf(latest, "", "")))
	}
	slices.SortStableFunc(h, func(a, b *helmv2.Snapshot) int {
		switch {
		case a == nil || b == nil:
			return boolOrder(a == nil, b == nil)
		}
		return b.Version - a.Version
	})
	return h
}

// boolOrder puts true after false.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// refresh replaces the first entry of h for r's revision with a snapshot
// of r, with the entry's ociDigest, then lets keep carry over what else
// stays; false when h has no such entry.
func refresh(h helmv2.Snapshots, r helm.Record, keep func(old, s *helmv2.Snapshot)) bool {
	for i, old := range h {
		if old == nil || old.Name != r.Release.Name || old.Namespace != r.Release.Namespace || old.Version != r.Release.Version {
			continue
		}
		s := snapshotTo(helm.SnapshotOf(r.Release, "", old.OCIDigest))
		keep(old, s)
		h[i] = s
		return true
	}
	return false
}

// snapshotTo is s as status.history holds it.
func snapshotTo(s helm.Snapshot) *helmv2.Snapshot {
	out := &helmv2.Snapshot{
		APIVersion: s.APIVersion, Digest: s.Digest, Name: s.Name, Namespace: s.Namespace, Version: s.Version,
		Status: s.Status, Action: helmv2.ReleaseAction(s.Action), ChartName: s.ChartName, ChartVersion: s.ChartVersion,
		AppVersion: s.AppVersion, ConfigDigest: s.ConfigDigest, OCIDigest: s.OCIDigest,
		FirstDeployed: metav1.NewTime(s.FirstDeployed), LastDeployed: metav1.NewTime(s.LastDeployed),
		Deleted: metav1.NewTime(s.Deleted),
	}
	if s.TestHooks != nil {
		out.TestHooks = testHooksTo(s.TestHooks)
	}
	return out
}

func testHooksTo(runs map[string]helm.HookRun) *map[string]*helmv2.TestHookStatus {
	hooks := map[string]*helmv2.TestHookStatus{}
	for name, run := range runs {
		hooks[name] = &helmv2.TestHookStatus{
			LastStarted: metav1.NewTime(run.Started), LastCompleted: metav1.NewTime(run.Completed), Phase: run.Phase,
		}
	}
	return &hooks
}

// releasedMessage is helm-controller's message of a successful install or
// upgrade of the revision s describes.
func releasedMessage(verb string, s *helmv2.Snapshot) string {
	return fmt.Sprintf("Helm %s succeeded%s", verb, releasedTarget(s))
}

// releasedTarget is how helm-controller's messages name the revision s
// describes.
func releasedTarget(s *helmv2.Snapshot) string {
	return fmt.Sprintf(" for release %s/%s.v%d with chart %s@%s", s.Namespace, s.Name, s.Version, s.ChartName, s.ChartVersion)
}

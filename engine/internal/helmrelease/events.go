package helmrelease

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
)

// helmStepAction is the action of the Event that reports the Helm steps
// of a reconcile: the last install, upgrade, rollback, test or uninstall,
// or Unlock for a pending revision marked failed; empty when none ran.
func helmStepAction(steps []helm.Result) string {
	for i := len(steps) - 1; i >= 0; i-- {
		switch steps[i].Action {
		case helm.ActionInstall:
			return string(helmv2.ActionHelmInstall)
		case helm.ActionUpgrade:
			return string(helmv2.ActionHelmUpgrade)
		case helm.ActionRollback:
			return string(helmv2.ActionHelmRollback)
		case helm.ActionTest:
			return string(helmv2.ActionHelmTest)
		case helm.ActionUninstall:
			return string(helmv2.ActionHelmUninstall)
		case helm.ActionCorrectDrift:
			return string(helmv2.ActionDriftDetection)
		case helm.ActionRecover:
			return string(helmv2.ActionUnlock)
		}
	}
	return ""
}

// logHelmSteps logs the end of each Helm action a reconcile ran, with the
// release and the revision it left.
func (r *Reconciler) logHelmSteps(self frame.Ref, rel helm.Release, res helm.Outcome, err error) {
	l := r.deps.Logger().WithValues("controller", "helmrelease", "controllerKind", helmv2.HelmReleaseKind,
		"name", self.Name, "namespace", self.Namespace, "release", rel.Namespace+"/"+rel.Name)
	for _, s := range res.Steps {
		l.Info("Helm action finished", "action", string(s.Action), "revision", s.Revision)
	}
	if err != nil {
		l.Error(err, "Helm action failed", "revision", res.Release.Revision)
	}
}

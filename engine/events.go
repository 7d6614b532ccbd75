package engine

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	"github.com/cozystack/cozy-aio/apply/helm"
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

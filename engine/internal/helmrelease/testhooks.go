package helmrelease

import (
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// testOptions maps spec.test onto apply/helm; nil when tests are off.
func testOptions(obj *helmv2.HelmRelease) *helm.TestOptions {
	t := obj.GetTest()
	if !t.Enable {
		return nil
	}
	o := &helm.TestOptions{Timeout: t.GetTimeout(obj.GetTimeout()).Duration, IgnoreFailures: t.IgnoreFailures}
	for _, f := range t.GetFilters() {
		o.Filters = append(o.Filters, helm.TestFilter{Name: f.Name, Exclude: f.Exclude})
	}
	return o
}

// setTestCondition sets TestSuccess as helm-controller does: from the test
// this reconcile ran; removed when tests are off or a new revision was
// made and not tested.
func setTestCondition(obj *helmv2.HelmRelease, res helm.Outcome, rel helm.Release) {
	if !obj.GetTest().Enable {
		conditions.Delete(obj, helmv2.TestSuccessCondition)
		return
	}
	r := res.Release
	name, version := splitChart(r.Chart)
	target := fmt.Sprintf("%s/%s.v%d with chart %s@%s", rel.Namespace, rel.Name, r.Revision, name, version)
	switch t := res.Test; {
	case t != nil && t.Err == nil:
		n := 0
		for _, run := range r.Tests {
			if run.Phase == "Succeeded" {
				n++
			}
		}
		hooks := "no test hooks"
		if n == 1 {
			hooks = "1 test hook completed successfully"
		} else if n > 1 {
			hooks = fmt.Sprintf("%d test hooks completed successfully", n)
		}
		conditions.MarkTrue(obj, helmv2.TestSuccessCondition, helmv2.TestSucceededReason, "Helm test succeeded for release %s: %s", target, hooks)
	case t != nil:
		conditions.MarkFalse(obj, helmv2.TestSuccessCondition, helmv2.TestFailedReason, "Helm test failed for release %s: %s", target, strings.TrimSpace(t.Err.Error()))
	default:
		for _, s := range res.Steps {
			if s.Action == helm.ActionInstall || s.Action == helm.ActionUpgrade || s.Action == helm.ActionRollback {
				conditions.Delete(obj, helmv2.TestSuccessCondition)
				return
			}
		}
	}
}

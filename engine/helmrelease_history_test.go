package engine

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestHistorySupersededAsRecords: a deployed revision marks the older
// deployed entries of status.history superseded, as Helm marks their
// records, while a failed one leaves them. The chaos campaign (seed 1,
// internal/chaos TestCampaign) found status.history saying v1 deployed
// next to a record saying superseded after an upgrade.
func TestHistorySupersededAsRecords(t *testing.T) {
	hr := &helmv2.HelmRelease{}
	rel := helm.Release{Name: "app", Namespace: "t"}
	step := func(rev int, status string) {
		setHelmStatus(hr, helm.Outcome{Release: helm.Result{Revision: rev, Status: status, Chart: "chaos-1.0.0"}}, rel)
	}
	statuses := func() []string {
		var out []string
		for _, s := range hr.Status.History {
			out = append(out, s.Status)
		}
		return out
	}
	step(1, "deployed")
	step(2, "failed")
	if got := statuses(); len(got) != 2 || got[0] != "failed" || got[1] != "deployed" {
		t.Fatalf("after a failed upgrade: %v, want [failed deployed]", got)
	}
	step(3, "deployed") // the rollback
	if got := statuses(); len(got) != 3 || got[0] != "deployed" || got[1] != "failed" || got[2] != "superseded" {
		t.Fatalf("after the rollback: %v, want [deployed failed superseded]", got)
	}
	step(3, "deployed") // in sync: the same revision again
	step(4, "deployed")
	if got := statuses(); got[0] != "deployed" || got[1] != "superseded" {
		t.Fatalf("after an upgrade: %v, want deployed then superseded", got)
	}
}

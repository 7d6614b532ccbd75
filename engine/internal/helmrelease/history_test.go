package helmrelease

import (
	"fmt"
	"slices"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/cozystack/cozy-aio/apply/helm"
)

const testOCIDigest = "sha256:9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370"

func testRecord(version int, status rcommon.Status, color string) *releasev1.Release {
	at := time.Date(2026, 12, 5, 10, version, 0, 0, time.UTC)
	return &releasev1.Release{
		Name: "app", Namespace: "t", Version: version,
		Info:   &releasev1.Info{Status: status, FirstDeployed: at, LastDeployed: at, Description: string(status)},
		Chart:  &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "demo", Version: "1.0.0+9933f58f8bf4", APIVersion: "v2"}},
		Config: map[string]any{"color": color},
	}
}

// TestHistoryAsHelmControllerKeepsIt: status.history after an install, an
// upgrade, a failed upgrade and the rollback that remedies it, as
// helm-controller writes it (its §4.2 rules): every entry a snapshot v2
// whose digest verifies the record as last written, the revision an upgrade
// superseded refreshed without an action, the rollback's new revision first
// without action or ociDigest.
func TestHistoryAsHelmControllerKeepsIt(t *testing.T) {
	var h helmv2.Snapshots
	v1 := testRecord(1, rcommon.StatusDeployed, "green")
	h = historyAfter(h, []helm.Record{{Action: helm.ActionInstall, Release: v1}}, testOCIDigest)
	want := func(i, version int, status string, action helmv2.ReleaseAction, oci string, r *releasev1.Release) {
		t.Helper()
		s := h[i]
		if s.Version != version || s.Status != status || s.Action != action || s.OCIDigest != oci ||
			s.APIVersion != "v2" || s.Digest != helm.RecordDigest(r, oci) || s.ConfigDigest != helm.ConfigDigest(r.Config) ||
			s.ChartVersion != "1.0.0+9933f58f8bf4" {
			t.Fatalf("history[%d] = %+v, want v%d %s action %q ociDigest %q", i, s, version, status, action, oci)
		}
	}
	want(0, 1, "deployed", helmv2.ReleaseActionInstall, testOCIDigest, v1)

	v2 := testRecord(2, rcommon.StatusDeployed, "red")
	v1s := testRecord(1, rcommon.StatusSuperseded, "green")
	h = historyAfter(h, []helm.Record{{Action: helm.ActionUpgrade, Release: v2}, {Action: helm.ActionUpgrade, Release: v1s}}, testOCIDigest)
	if len(h) != 2 {
		t.Fatalf("after the upgrade: %d entries", len(h))
	}
	want(0, 2, "deployed", helmv2.ReleaseActionUpgrade, testOCIDigest, v2)
	want(1, 1, "superseded", "", testOCIDigest, v1s)

	v3 := testRecord(3, rcommon.StatusFailed, "blue")
	h = historyAfter(h, []helm.Record{{Action: helm.ActionUpgrade, Release: v3}}, testOCIDigest)
	want(0, 3, "failed", helmv2.ReleaseActionUpgrade, testOCIDigest, v3)

	v3s := testRecord(3, rcommon.StatusSuperseded, "blue")
	v2s := testRecord(2, rcommon.StatusSuperseded, "red")
	v4 := testRecord(4, rcommon.StatusDeployed, "red")
	h = historyAfter(h, []helm.Record{{Action: helm.ActionRollback, Release: v3s}, {Action: helm.ActionRollback, Release: v2s},
		{Action: helm.ActionRollback, Release: v4}}, testOCIDigest)
	if len(h) != 4 {
		t.Fatalf("after the rollback: %d entries, want 4", len(h))
	}
	want(0, 4, "deployed", "", "", v4)
	want(1, 3, "superseded", helmv2.ReleaseActionRollback, testOCIDigest, v3s)
	want(2, 2, "superseded", helmv2.ReleaseActionRollback, testOCIDigest, v2s)

	// Nothing written (in sync): the history is kept, cut as
	// helm-controller cuts it, to the previous deployed or superseded
	// revision, whatever spec.maxHistory says.
	hr := &helmv2.HelmRelease{}
	hr.Status.History = h
	one := 1
	hr.Spec.MaxHistory = &one
	setHelmStatus(hr, helm.Outcome{Next: helm.Next{Kind: helm.NextDone}}, helm.Release{Name: "app", Namespace: "t"})
	if got := hr.Status.History; len(got) != 2 || got[0].Version != 4 || got[1].Version != 3 {
		t.Fatalf("in sync: history %+v, want v4 and v3", got)
	}

	// A new install clears the history.
	v5 := testRecord(5, rcommon.StatusDeployed, "red")
	h = historyAfter(hr.Status.History, []helm.Record{{Action: helm.ActionInstall, Release: v5}}, testOCIDigest)
	if len(h) != 1 {
		t.Fatalf("after an install: %d entries", len(h))
	}
	want(0, 5, "deployed", helmv2.ReleaseActionInstall, testOCIDigest, v5)
}

// TestHistoryAlignedWithTheStoredRecords: a history that missed writes (a
// status update lost to a crash, a rollback's new revision put before a
// revision the history no longer had) is brought back to the records as
// stored: entries taken again from their records, keeping their action,
// the newest revision added, newest first.
func TestHistoryAlignedWithTheStoredRecords(t *testing.T) {
	v3 := testRecord(3, rcommon.StatusDeployed, "green")
	v5 := testRecord(5, rcommon.StatusDeployed, "green")
	v6 := testRecord(6, rcommon.StatusFailed, "bad")
	h := historyAfter(nil, []helm.Record{{Action: helm.ActionInstall, Release: v3}}, testOCIDigest)
	h = historyAfter(h, []helm.Record{{Action: helm.ActionUpgrade, Release: v6}}, testOCIDigest)
	// What the records say after a rollback of v6 to v5 whose status
	// update was lost: v7 deployed, every older revision superseded.
	v7 := testRecord(7, rcommon.StatusDeployed, "green")
	v6s := testRecord(6, rcommon.StatusSuperseded, "bad")
	v5s := testRecord(5, rcommon.StatusSuperseded, "green")
	v3s := testRecord(3, rcommon.StatusSuperseded, "green")
	h = historyAfter(h, []helm.Record{{Action: helm.ActionRollback, Release: v5}}, testOCIDigest)
	h = alignHistory(h, []*releasev1.Release{v7, v6s, v5s, v3s})
	var got []string
	for _, s := range h {
		got = append(got, fmt.Sprintf("v%d %s %s", s.Version, s.Status, s.Action))
	}
	want := []string{"v7 deployed ", "v6 superseded upgrade", "v5 superseded ", "v3 superseded install"}
	if !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	for i, r := range []*releasev1.Release{v7, v6s, v5s, v3s} {
		if d := helm.RecordDigest(r, h[i].OCIDigest); h[i].Digest != d {
			t.Errorf("history[%d] digest %s does not verify its record (%s)", i, h[i].Digest, d)
		}
	}
	if again := alignHistory(slices.Clone(h), []*releasev1.Release{v7, v6s, v5s, v3s}); !slices.EqualFunc(again, h, func(a, b *helmv2.Snapshot) bool { return a == b }) {
		t.Errorf("aligning an aligned history changed it")
	}
}

package status

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUnitSettled: a unit is settled when Ready, Stalled, or failed for a
// reason that is not "in progress"; a unit still Reconciling is not, even
// with a failure reason on Ready (a release waiting for its source's first
// artifact, which the demo once counted as done and reported not Ready).
func TestUnitSettled(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: 1}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{"ready", []metav1.Condition{cond("Ready", metav1.ConditionTrue, "InstallSucceeded")}, true},
		{"failed", []metav1.Condition{cond("Ready", metav1.ConditionFalse, "InstallFailed")}, true},
		{"stalled", []metav1.Condition{cond("Ready", metav1.ConditionFalse, "ArtifactFailed"), cond("Stalled", metav1.ConditionTrue, "ArtifactFailed")}, true},
		{"waiting for the source", []metav1.Condition{cond("Ready", metav1.ConditionFalse, "ArtifactFailed"), cond("Reconciling", metav1.ConditionTrue, "Progressing")}, false},
		{"progressing", []metav1.Condition{cond("Ready", metav1.ConditionUnknown, "Progressing")}, false},
		{"dependency", []metav1.Condition{cond("Ready", metav1.ConditionFalse, "DependencyNotReady")}, false},
		{"no status", nil, false},
	} {
		hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "r", Generation: 1}}
		hr.Status.Conditions = tc.conds
		if got := unitOf(helmv2.HelmReleaseKind, hr).Settled; got != tc.want {
			t.Errorf("%s: settled %v, want %v", tc.name, got, tc.want)
		}
	}
}

package engine

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// TestRollbackOptionsAsFlux checks spec.rollback maps onto the remedying
// rollbacks with helm-controller's meanings (timeout defaulting to
// spec.timeout, waits on unless disabled).
func TestRollbackOptionsAsFlux(t *testing.T) {
	hr := &helmv2.HelmRelease{Spec: helmv2.HelmReleaseSpec{Timeout: &metav1.Duration{Duration: 3 * time.Minute}}}
	if got := helmOptions(hr, "", nil).Rollback; got != nil {
		t.Fatalf("without spec.rollback: %+v, want the install/upgrade settings", got)
	}
	hr.Spec.Rollback = &helmv2.Rollback{DisableWait: true, DisableHooks: true, Force: true, CleanupOnFail: true}
	got := *helmOptions(hr, "", nil).Rollback
	want := helm.RollbackOptions{Timeout: 3 * time.Minute, Wait: helm.WaitNone, WaitForJobs: true, DisableHooks: true,
		Force: true, CleanupOnFail: true, MaxHistory: hr.GetMaxHistory()}
	if got != want {
		t.Fatalf("rollback = %+v, want %+v", got, want)
	}
	hr.Spec.Rollback = &helmv2.Rollback{Timeout: &metav1.Duration{Duration: time.Minute}, DisableWaitForJobs: true}
	if got := helmOptions(hr, "", nil).Rollback; got.Timeout != time.Minute || got.Wait != helm.WaitKStatus || got.WaitForJobs {
		t.Fatalf("rollback = %+v", got)
	}
}

package helm_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/apply/helm"
)

func ExampleMergeValues() {
	defaults := map[string]any{"image": map[string]any{"repository": "nginx", "tag": "1.27"}, "replicas": 1}
	fromSecret := map[string]any{"image": map[string]any{"tag": "1.29"}}
	inline := map[string]any{"replicas": 3}
	fmt.Println(helm.MergeValues(defaults, fromSecret, inline))
	// Output: map[image:map[repository:nginx tag:1.29] replicas:3]
}

func ExampleAfterFailure() {
	pol := helm.Remediation{Retries: 2} // three attempts, rollback after each
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var st helm.State
	for range 3 {
		var plan helm.Plan
		st, plan = helm.AfterFailure(st, helm.ActionUpgrade, pol, now)
		fmt.Printf("%d: remedy=%s next=%s\n", st.UpgradeFailures, plan.Remedy, plan.Next.Kind)
	}
	ok, next := helm.Admit(st, helm.ActionUpgrade, pol, now)
	fmt.Println(ok, next.Reason)
	// Output:
	// 1: remedy=rollback next=Retry
	// 2: remedy=rollback next=Retry
	// 3: remedy=rollback next=Stalled
	// false upgrade failed 3 times; retries (2) exhausted
}

func ExampleHolderDead() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	self := helm.Holder{ID: "cozy-aio-0", Start: start}
	previous := helm.Holder{ID: "cozy-aio-0", Start: start.Add(-time.Hour)}
	fmt.Println(helm.HolderDead(previous, self, nil))
	// Output: true
}

// ExampleManager_Reconcile shows how the engine drives a release. It needs
// an API server, so it is compiled but not run.
func ExampleManager_Reconcile() {
	var cfg *rest.Config // the process's rest.Config
	m, err := helm.New(cfg, helm.Options{Holder: helm.Holder{ID: "cozy-aio-0"}})
	if err != nil {
		panic(err)
	}
	rel := helm.Release{Name: "redis", Namespace: "tenant-a", ServiceAccount: "tenant-a"}
	var st helm.State // from HelmRelease status
	out, err := m.Reconcile(context.Background(), rel, helm.ReconcileOptions{
		Spec: helm.Spec{
			Chart:   helm.Chart{Ref: "oci://registry.example/charts/redis", Version: "1.2.3"},
			Values:  []map[string]any{{"replicas": 3}},
			Timeout: 5 * time.Minute,
		},
		Upgrade: helm.Remediation{Retries: 2},
		Drift:   helm.DriftCorrect,
	}, st)
	// Persist out.State; requeue after out.Next.After when out.Next.Kind
	// is NextRetry; report err and out.Next.Reason in the Ready condition.
	fmt.Println(out.Next.Kind, err)
}

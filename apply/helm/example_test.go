package helm_test

import (
	"fmt"
	"time"

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

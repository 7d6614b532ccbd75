package helm_test

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cozystack/cozy-aio/apply/helm"
)

func TestRemediateOnFailureRetriesThenRollsBack(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "remedy", Namespace: ns}
	opts := helm.ReconcileOptions{
		Spec:    helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("message", "good")}},
		Upgrade: helm.Remediation{Retries: 2},
	}
	out, err := m.Reconcile(ctx, rel, opts, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	// The upgrade is rejected by the API server after Helm stored it.
	opts.Values = []map[string]any{values("message", "bad", "fail", true)}
	st := out.State
	for attempt := 1; attempt <= 3; attempt++ {
		out, err = m.Reconcile(ctx, rel, opts, st)
		mustContain(t, err, "helm upgrade "+ns+"/remedy", "70000")
		st = out.State
		if st.UpgradeFailures != attempt {
			t.Fatalf("attempt %d: %d failures counted", attempt, st.UpgradeFailures)
		}
		if n := len(out.Steps); n != 2 || out.Steps[0].Action != helm.ActionUpgrade || out.Steps[1].Action != helm.ActionRollback {
			t.Fatalf("attempt %d: steps %+v", attempt, out.Steps)
		}
		want := helm.NextRetry
		if attempt == 3 {
			want = helm.NextStalled // 1 + 2 retries; the last failure is remediated too
		}
		if out.Next.Kind != want || out.Release.Status != "deployed" {
			t.Fatalf("attempt %d: next %+v release %+v", attempt, out.Next, out.Release)
		}
		if msg, _ := configMapMessage(t, ns, "remedy"); msg != "good" {
			t.Fatalf("attempt %d: message %q after rollback", attempt, msg)
		}
	}
	// Stalled: nothing more happens for the same spec...
	out, err = m.Reconcile(ctx, rel, opts, st)
	if err != nil || len(out.Steps) != 0 || out.Next.Kind != helm.NextStalled {
		t.Fatalf("after exhaustion: %+v %v", out, err)
	}
	// It names the cause from the failed revision, though the latest is
	// the rollback: a caller that lost the failure's error still has it.
	if out.Release.Status != "deployed" || !strings.Contains(out.Next.Cause, "70000") {
		t.Fatalf("after exhaustion: cause %q, latest %+v", out.Next.Cause, out.Release)
	}
	// ...and a new spec starts over.
	opts.Values = []map[string]any{values("message", "fixed")}
	out, err = m.Reconcile(ctx, rel, opts, out.State)
	if err != nil || out.Next.Kind != helm.NextDone || out.State.UpgradeFailures != 0 {
		t.Fatalf("new spec: %+v %v", out, err)
	}
	if msg, _ := configMapMessage(t, ns, "remedy"); msg != "fixed" {
		t.Fatalf("message %q", msg)
	}
}

func TestRetryOnFailureRetriesAtItsInterval(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	clock := clocktesting.NewFakePassiveClock(time.Now())
	m := newManager(t, helm.Options{Now: clock.Now})
	rel := helm.Release{Name: "retry", Namespace: ns}
	iv := 2 * time.Second
	opts := helm.ReconcileOptions{
		Spec:    helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("fail", true)}},
		Install: helm.Remediation{Strategy: helm.RetryOnFailure, RetryInterval: iv},
	}
	out, err := m.Reconcile(ctx, rel, opts, helm.State{})
	mustContain(t, err, "helm install "+ns+"/retry")
	if out.Next.Kind != helm.NextRetry || out.Next.After != iv || out.State.InstallFailures != 1 {
		t.Fatalf("first failure: %+v", out)
	}
	if out.Release.Status != "failed" {
		t.Fatalf("RetryOnFailure must keep the failed release, got %+v", out.Release)
	}
	// Too early: no attempt, the wait is what is left of the interval.
	early, err := m.Reconcile(ctx, rel, opts, out.State)
	if err != nil || len(early.Steps) != 0 || early.Next.Kind != helm.NextRetry || early.Next.After <= 0 || early.Next.After > iv {
		t.Fatalf("early reconcile: %+v %v", early, err)
	}
	clock.SetTime(clock.Now().Add(out.Next.After))
	again, err := m.Reconcile(ctx, rel, opts, out.State)
	mustContain(t, err, "helm install "+ns+"/retry")
	if again.State.InstallFailures != 2 || len(again.Steps) != 1 || again.Steps[0].Action != helm.ActionInstall {
		t.Fatalf("retry: %+v", again)
	}
	// Fixing the values installs over the failed history.
	opts.Values = nil
	fixed, err := m.Reconcile(ctx, rel, opts, again.State)
	if err != nil || fixed.Release.Status != "deployed" {
		t.Fatalf("fixed: %+v %v", fixed, err)
	}
}

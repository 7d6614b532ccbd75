package helm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/cozy-aio/apply/helm"
)

// endPod plays the kubelet for a test hook Pod: it waits for the Pod
// named name (other than the one with UID old), checks that none of
// notYet exists (the hooks run one at a time, in weight order), and
// writes its phase through the status subresource. It returns the
// Pod's UID.
func endPod(t *testing.T, ns, name string, old types.UID, phase corev1.PodPhase, notYet ...string) types.UID {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	var pod corev1.Pod
	for {
		err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod)
		if err == nil && pod.UID != old && pod.DeletionTimestamp == nil {
			break
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("test Pod %s/%s never appeared", ns, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range notYet {
		var other corev1.Pod
		err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &other)
		if err == nil && other.UID != old && other.Status.Phase == corev1.PodPending {
			t.Fatalf("test Pod %s runs beside %s: hooks must run one after the other", n, name)
		}
	}
	pod.Status.Phase = phase
	if err := cp.Client.Status().Update(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	return pod.UID
}

type reconciled struct {
	out helm.Outcome
	err error
}

func reconcileAsync(ctx context.Context, m *helm.Manager, rel helm.Release, o helm.ReconcileOptions, st helm.State) chan reconciled {
	ch := make(chan reconciled, 1)
	go func() {
		out, err := m.Reconcile(ctx, rel, o, st)
		ch <- reconciled{out, err}
	}()
	return ch
}

func stepActions(out helm.Outcome) []helm.Action {
	var a []helm.Action
	for _, s := range out.Steps {
		a = append(a, s.Action)
	}
	return a
}

func sameActions(got []helm.Action, want ...helm.Action) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestReconcileRunsTestHooks runs a real chart's test Pods after an
// install and after an upgrade, in weight order and through the filters:
// a success records every hook's run in the release, a tested revision is
// not tested again, and a failed test of an upgrade is remedied by the
// upgrade's policy (a rollback).
func TestReconcileRunsTestHooks(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	rel := helm.Release{Name: "tested", Namespace: ns}
	yes := true
	opts := helm.ReconcileOptions{
		Spec:    helm.Spec{Chart: helm.Chart{Path: chartTgz(t, "tests")}, Timeout: time.Minute},
		Test:    &helm.TestOptions{Filters: []helm.TestFilter{{Name: "tested-skipped", Exclude: true}}},
		Upgrade: helm.Remediation{RemediateLastFailure: &yes},
	}
	ch := reconcileAsync(ctx, m, rel, opts, helm.State{})
	first := endPod(t, ns, "tested-first", "", corev1.PodSucceeded, "tested-second")
	second := endPod(t, ns, "tested-second", "", corev1.PodSucceeded)
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !sameActions(stepActions(r.out), helm.ActionInstall, helm.ActionTest) || r.out.Test == nil || r.out.Test.Err != nil ||
		r.out.Next.Kind != helm.NextDone {
		t.Fatalf("install: steps %v test %+v next %+v", stepActions(r.out), r.out.Test, r.out.Next)
	}
	tests := r.out.Release.Tests
	if tests["tested-first"].Phase != "Succeeded" || tests["tested-second"].Phase != "Succeeded" || tests["tested-skipped"].Phase != "" {
		t.Fatalf("recorded runs %+v", tests)
	}
	if f, s := tests["tested-first"], tests["tested-second"]; f.Started.IsZero() || f.Completed.After(s.Started) {
		t.Fatalf("first %+v must complete before second %+v starts", f, s)
	}
	var skipped corev1.Pod
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tested-skipped"}, &skipped); !apierrors.IsNotFound(err) {
		t.Fatalf("the excluded hook ran: %v", err)
	}

	// Tested: the next reconcile runs nothing.
	out, err := m.Reconcile(ctx, rel, opts, r.out.State)
	if err != nil || len(out.Steps) != 0 || out.Test != nil || out.Next.Kind != helm.NextDone {
		t.Fatalf("in sync: steps %v test %+v next %+v err %v", stepActions(out), out.Test, out.Next, err)
	}

	// An upgrade whose first test fails is rolled back; Helm stops at the
	// failed hook.
	opts.Values = []map[string]any{values("message", "new")}
	ch = reconcileAsync(ctx, m, rel, opts, out.State)
	endPod(t, ns, "tested-first", first, corev1.PodFailed, "tested-second")
	r = <-ch
	var te *helm.TestError
	if !errors.As(r.err, &te) || te.Revision != 2 || len(te.Hooks) != 1 || te.Hooks[0] != "tested-first" {
		t.Fatalf("failed test: %v", r.err)
	}
	mustContain(t, r.err, "helm test "+ns+"/tested", "tested-first")
	if !sameActions(stepActions(r.out), helm.ActionUpgrade, helm.ActionTest, helm.ActionRollback) ||
		r.out.State.UpgradeFailures != 1 || r.out.Next.Kind != helm.NextStalled || r.out.Release.Revision != 3 {
		t.Fatalf("failed test: steps %v state %+v next %+v release %+v", stepActions(r.out), r.out.State, r.out.Next, r.out.Release)
	}
	if msg, _ := configMapMessage(t, ns, "tested"); msg != "hello" {
		t.Fatalf("message %q after the rollback", msg)
	}
	var pod corev1.Pod
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tested-second"}, &pod); err != nil || pod.UID != second {
		t.Fatalf("the hook after the failed one ran again: %v", err)
	}
	// Stalled: the same spec is not upgraded again.
	out, err = m.Reconcile(ctx, rel, opts, r.out.State)
	if err != nil || len(out.Steps) != 0 || out.Next.Kind != helm.NextStalled {
		t.Fatalf("after the failed test: steps %v next %+v err %v", stepActions(out), out.Next, err)
	}
}

// TestReconcileTestFailureIgnored keeps an installed revision whose test
// failed when failures are ignored, records the failure, and does not
// test it again; without ignoring, a failed test of an install stalls it
// (no retries) and stays failed on the next reconcile.
func TestReconcileTestFailureIgnored(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	filters := []helm.TestFilter{{Name: "ignored-first"}, {Name: "strict-first"}}
	opts := helm.ReconcileOptions{
		Spec: helm.Spec{Chart: helm.Chart{Path: chartTgz(t, "tests")}, Timeout: time.Minute},
		Test: &helm.TestOptions{Filters: filters, IgnoreFailures: true},
	}
	rel := helm.Release{Name: "ignored", Namespace: ns}
	ch := reconcileAsync(ctx, m, rel, opts, helm.State{})
	endPod(t, ns, "ignored-first", "", corev1.PodFailed)
	r := <-ch
	if r.err != nil || r.out.Next.Kind != helm.NextDone || r.out.Test == nil || !errors.As(r.out.Test.Err, new(*helm.TestError)) {
		t.Fatalf("ignored failure: err %v next %+v test %+v", r.err, r.out.Next, r.out.Test)
	}
	if p := r.out.Release.Tests["ignored-first"].Phase; p != "Failed" || r.out.Release.Status != "deployed" {
		t.Fatalf("release %+v", r.out.Release)
	}
	out, err := m.Reconcile(ctx, rel, opts, r.out.State)
	if err != nil || len(out.Steps) != 0 || out.Next.Kind != helm.NextDone {
		t.Fatalf("ignored, again: steps %v next %+v err %v", stepActions(out), out.Next, err)
	}

	opts.Test.IgnoreFailures = false
	rel = helm.Release{Name: "strict", Namespace: ns}
	ch = reconcileAsync(ctx, m, rel, opts, helm.State{})
	endPod(t, ns, "strict-first", "", corev1.PodFailed)
	r = <-ch
	if !errors.As(r.err, new(*helm.TestError)) || r.out.State.InstallFailures != 1 || r.out.Next.Kind != helm.NextStalled ||
		!sameActions(stepActions(r.out), helm.ActionInstall, helm.ActionTest) {
		t.Fatalf("strict failure: err %v steps %v state %+v next %+v", r.err, stepActions(r.out), r.out.State, r.out.Next)
	}
	out, err = m.Reconcile(ctx, rel, opts, r.out.State)
	if !errors.As(err, new(*helm.TestError)) || len(out.Steps) != 0 || out.Next.Kind != helm.NextStalled {
		t.Fatalf("strict, again: steps %v next %+v err %v", stepActions(out), out.Next, err)
	}
}

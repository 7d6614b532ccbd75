package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/switchover"
)

// troubledFixtures were recorded as fluxFixtures were, with -troubled:
// what Flux's helm-controller left of a release whose install failed, one
// whose upgrade failed (both out of retries, Stalled), one it was
// installing when it stopped (revision 1 pending-install), and one it
// installed and tested with spec.test.enable.
const troubledFixtures = "testdata/switchover/flux-2.9-troubled.yaml"

// TestTakeOverTroubledReleasesFromFluxFixtures: cozy-aio takes the
// troubled releases up where helm-controller would on its restart. The
// failed ones stay as they are (no new revision, no record written,
// Ready=False and Stalled=True RetriesExceeded as Flux wrote them); the
// pending one is unlocked as helm-controller unlocks it (revision 1 failed,
// "Release unlocked from stale 'pending-install' state", not uninstalled)
// and then released again as revision 2 with an upgrade, which
// supersedes revision 1 (no revision was deployed: helm-controller
// upgrades), and which its Deployment's readiness completes; the tested one is neither upgraded nor tested again.
func TestTakeOverTroubledReleasesFromFluxFixtures(t *testing.T) {
	ctx := context.Background()
	reg := chartRegistry(t)
	if err := switchover.PushTroubled(ctx, reg); err != nil {
		t.Fatal(err)
	}
	loaded := loadFixtures(t, troubledFixtures)
	o := switchover.Options{Host: reg.Host(), Insecure: true}
	for _, src := range []*unstructured.Unstructured{o.TroubledSource(), o.TestedSource()} {
		if err := cp.Client.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	ns := switchover.TroubledNamespace
	records := func() map[string]string {
		var l corev1.SecretList
		if err := cp.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range l.Items {
			out[s.Name] = s.Labels["status"] + "@" + s.ResourceVersion
		}
		return out
	}
	before := records()
	if len(before) != 5 {
		t.Fatalf("the fixtures hold %d release records, want 5: %v", len(before), before)
	}

	testedReady := ""
	for _, u := range loaded.Units {
		if u.GetName() == switchover.Tested {
			_, testedReady = readyOf(u)
		}
	}
	if !strings.HasPrefix(testedReady, "Helm test succeeded") {
		t.Fatalf("the fixture's %s says Ready %q, want helm-controller's summary of its test", switchover.Tested, testedReady)
	}
	startEngine(t, engine.Options{})
	token := requestReconcileOf(t, loaded.Units)
	failed := []string{switchover.InstallFailed, switchover.UpgradeFailed}
	get := func(name string) *unstructured.Unstructured {
		u := switchover.TroubledRelease(name)
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	var pending string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range append(failed, switchover.Tested) {
			if at, _, _ := unstructured.NestedString(get(name).Object, "status", "lastHandledReconcileAt"); at != token {
				pending = name + " has not answered"
				return false, nil
			}
		}
		st, err := switchover.ReleaseStatuses(ctx, cp.Client, ns, switchover.PendingInstall)
		pending = switchover.PendingInstall + " " + st
		if err == nil && st == "1:failed,2:pending-upgrade" {
			// The install waits for its Deployment: no kubelet runs
			// here, so its status says it is available.
			err = deploymentAvailable(ctx, ns, switchover.PendingInstall)
		}
		return err == nil && st == "1:superseded,2:deployed", err
	})
	if err != nil {
		t.Fatalf("%s: %v", pending, err)
	}

	after := records()
	for _, name := range failed {
		for k, v := range before {
			if strings.HasPrefix(k, "sh.helm.release.v1."+name+".") && after[k] != v {
				t.Errorf("%s: record %s %s → %s", name, k, v, after[k])
			}
		}
		hr := get(name)
		ready, msg := readyOf(hr)
		stalled, reason := condition(hr, meta.StalledCondition)
		if ready != "False" || stalled != "True" || reason != "RetriesExceeded" {
			t.Errorf("%s: Ready %s (%s), Stalled %s %s; want Ready=False and Stalled=True RetriesExceeded, as Flux left it", name, ready, msg, stalled, reason)
		}
	}
	// The release helm-controller installed and tested with
	// spec.test.enable: neither upgraded nor tested again, its record
	// untouched, Ready and TestSuccess as helm-controller left them.
	for k, v := range before {
		if strings.HasPrefix(k, "sh.helm.release.v1."+switchover.Tested+".") && after[k] != v {
			t.Errorf("%s: record %s %s → %s", switchover.Tested, k, v, after[k])
		}
	}
	tested := get(switchover.Tested)
	if ready, msg := readyOf(tested); ready != "True" || msg != testedReady {
		t.Errorf("%s: Ready %s %q, want True %q as helm-controller left it", switchover.Tested, ready, msg, testedReady)
	}
	if st, reason := condition(tested, "TestSuccess"); st != "True" {
		t.Errorf("%s: TestSuccess %s %s, want True as helm-controller left it", switchover.Tested, st, reason)
	}
	if n := len(after); n != 6 {
		t.Errorf("%d release records, want 6 (revision 2 of %s added): %v", n, switchover.PendingInstall, after)
	}
	rel := releaseRecord(t, ns, switchover.PendingInstall, 1)
	// Unlocked, then superseded by the upgrade that released it again.
	if want := "Release unlocked from stale 'pending-install' state"; rel.Info.Status.String() != "superseded" || rel.Info.Description != want {
		t.Errorf("%s v1: %s %q, want superseded %q", switchover.PendingInstall, rel.Info.Status, rel.Info.Description, want)
	}
	// Released again as helm-controller releases a failed revision when
	// none was ever deployed: with an upgrade.
	if rel := releaseRecord(t, ns, switchover.PendingInstall, 2); rel.Info.Description != "Upgrade complete" {
		t.Errorf("%s v2: %q, want Helm's %q", switchover.PendingInstall, rel.Info.Description, "Upgrade complete")
	}
}

// deploymentAvailable writes a status that says Deployment ns/name is
// available, as the deployment controller would once its Pods run.
func deploymentAvailable(ctx context.Context, ns, name string) error {
	d := &appsv1.Deployment{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	n := int32(1)
	if d.Spec.Replicas != nil {
		n = *d.Spec.Replicas
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		}}
	return cp.Client.Status().Update(ctx, d)
}

// condition is the status and reason of u's condition typ.
func condition(u *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			return s, r
		}
	}
	return "", ""
}

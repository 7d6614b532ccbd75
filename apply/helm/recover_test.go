package helm_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/kubernetes"
)

// helmStorage is Helm's own Secret storage of a namespace, to write
// release state as a crashed process would have left it.
func helmStorage(t *testing.T, ns string) *storage.Storage {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns)))
}

// leavePending stores a copy of revision 1 as revision rev with status st,
// held by h, as if its holder died in the middle of the action.
func leavePending(t *testing.T, ns, name string, rev int, st rcommon.Status, h helm.Holder) {
	t.Helper()
	s := helmStorage(t, ns)
	r, err := s.Get(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	rel := *r.(*releasev1.Release)
	info := *rel.Info
	info.Status, info.Description = st, "in flight when the process died"
	rel.Info, rel.Version = &info, rev
	rel.Config = map[string]any{"message": "half-applied"}
	rel.Labels = map[string]string{helm.LabelHolder: h.ID, helm.LabelHolderStart: strconv.FormatInt(h.Start.UnixNano(), 10)}
	if h == (helm.Holder{}) {
		rel.Labels = nil // another tool's revision: no holder
	}
	if h.Claim != "" {
		rel.Labels[helm.LabelHolderClaim] = h.Claim
	}
	if err := s.Create(&rel); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverPendingUpgradeOfDeadHolder(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	t0 := time.Now().Add(-time.Hour)
	old := newManager(t, helm.Options{Holder: helm.Holder{ID: "engine-0", Start: t0}})
	rel := helm.Release{Name: "crash", Namespace: ns}
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("message", "before")}}}
	out, err := old.Reconcile(ctx, rel, opts, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	leavePending(t, ns, "crash", 2, rcommon.StatusPendingUpgrade, old.Holder())

	// The process restarts: same ID, later start. Nobody intervenes.
	m := newManager(t, helm.Options{Holder: helm.Holder{ID: "engine-0", Start: t0.Add(time.Minute)}})
	opts.Values = []map[string]any{values("message", "after")}
	out, err = m.Reconcile(ctx, rel, opts, out.State)
	if err != nil {
		t.Fatal(err)
	}
	var actions []helm.Action
	for _, s := range out.Steps {
		actions = append(actions, s.Action)
	}
	want := []helm.Action{helm.ActionRecover, helm.ActionRollback, helm.ActionUpgrade}
	if len(actions) != len(want) || actions[0] != want[0] || actions[1] != want[1] || actions[2] != want[2] {
		t.Fatalf("steps %v, want %v", actions, want)
	}
	if out.Release.Status != "deployed" || out.Next.Kind != helm.NextDone {
		t.Fatalf("outcome %+v", out)
	}
	if msg, _ := configMapMessage(t, ns, "crash"); msg != "after" {
		t.Fatalf("message %q", msg)
	}
	secs := releaseSecrets(t, ns, "crash")
	if secs["2"].Labels["status"] != "failed" {
		t.Fatalf("pending revision 2 is %s, want failed", secs["2"].Labels["status"])
	}
}

func TestPendingOfLiveHolderIsLeftAlone(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	now := time.Now()
	m := newManager(t, helm.Options{
		Holder:      helm.Holder{ID: "engine-0", Start: now},
		HolderAlive: func(h helm.Holder) bool { return h.ID == "engine-1" },
	})
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}}
	for i, h := range []helm.Holder{
		{ID: "engine-0", Start: now.Add(time.Minute)}, // a newer incarnation of this process
		{ID: "engine-1", Start: now},                  // another live process
	} {
		rel := helm.Release{Name: "held" + strconv.Itoa(i), Namespace: ns}
		if _, err := m.Reconcile(ctx, rel, opts, helm.State{}); err != nil {
			t.Fatal(err)
		}
		leavePending(t, ns, rel.Name, 2, rcommon.StatusPendingUpgrade, h)
		out, err := m.Reconcile(ctx, rel, opts, helm.State{})
		var held *helm.HeldError
		if !errors.As(err, &held) || held.Holder.ID != h.ID {
			t.Fatalf("holder %v: want HeldError, got %v", h, err)
		}
		mustContain(t, err, ns+"/"+rel.Name, "pending-upgrade")
		if len(out.Steps) != 0 || out.Next.Kind != helm.NextRetry {
			t.Fatalf("outcome %+v", out)
		}
	}
}

// TestHolderClaim: the claim of the action is recorded on the revisions
// it writes, and the claim recorded on a pending revision reaches
// HolderAlive, so that a live holder that lost its claim is recovered from.
func TestHolderClaim(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	now := time.Now()
	m := newManager(t, helm.Options{
		Holder:      helm.Holder{ID: "engine-0", Start: now},
		Claim:       func(context.Context) string { return "3.mine" },
		HolderAlive: func(h helm.Holder) bool { return h.ID == "engine-1" && h.Claim == "0.live" },
	})
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}}
	for _, c := range []struct {
		name, claim string
		held        bool
	}{{"claim-live", "0.live", true}, {"claim-ended", "0.ended", false}} {
		rel := helm.Release{Name: c.name, Namespace: ns}
		if _, err := m.Reconcile(ctx, rel, opts, helm.State{}); err != nil {
			t.Fatal(err)
		}
		if got := releaseSecrets(t, ns, c.name)["1"].Labels[helm.LabelHolderClaim]; got != "3.mine" {
			t.Fatalf("%s: revision 1 claims %q, want the action's claim 3.mine", c.name, got)
		}
		leavePending(t, ns, c.name, 2, rcommon.StatusPendingUpgrade, helm.Holder{ID: "engine-1", Start: now, Claim: c.claim})
		out, err := m.Reconcile(ctx, rel, opts, helm.State{})
		var held *helm.HeldError
		if got := errors.As(err, &held); got != c.held {
			t.Fatalf("%s: held = %v (%v), want %v", c.name, got, err, c.held)
		}
		if c.held {
			continue
		}
		if err != nil || out.Release.Status != "deployed" {
			t.Fatalf("%s: %v, outcome %+v", c.name, err, out)
		}
		secs := releaseSecrets(t, ns, c.name)
		if l := secs["2"].Labels; l["status"] != "failed" || l[helm.LabelHolder] != "engine-0" || l[helm.LabelHolderClaim] != "3.mine" {
			t.Fatalf("%s: recovered revision 2 has labels %v, want failed by engine-0 under claim 3.mine", c.name, l)
		}
	}
}

func TestPendingInstallAndNoDeployedReleaseAreRecovered(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{})
	s := helmStorage(t, ns)
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}}
	for _, st := range []rcommon.Status{rcommon.StatusPendingInstall, rcommon.StatusFailed} {
		name := "no-deployed-" + st.String()
		// A first revision only, never deployed: left by a dead Flux
		// helm-controller (no holder) or a failed install.
		rel := &releasev1.Release{
			Name: name, Namespace: ns, Version: 1,
			Info: &releasev1.Info{Status: st, FirstDeployed: time.Now(), LastDeployed: time.Now()},
		}
		if err := s.Create(rel); err != nil {
			t.Fatal(err)
		}
		out, err := m.Reconcile(ctx, helm.Release{Name: name, Namespace: ns}, opts, helm.State{})
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if out.Release.Status != "deployed" {
			t.Fatalf("%s: outcome %+v", st, out)
		}
		if msg, _ := configMapMessage(t, ns, name); msg != "hello" {
			t.Fatalf("%s: message %q", st, msg)
		}
	}
}

// TestPendingOfAnotherToolIsUnlockedAsHelmControllerDoes: a revision left
// pending by another tool (no holder: Flux's helm-controller stopped in the
// middle of an action) is marked failed with helm-controller's
// description and not remedied; the action then proceeds as
// helm-controller's would: an upgrade over the failed revision when a
// deployed one remains (no rollback first), an install over it when none
// does (no uninstall first, so the pending revision's record stays).
func TestPendingOfAnotherToolIsUnlockedAsHelmControllerDoes(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	m := newManager(t, helm.Options{Holder: helm.Holder{ID: "engine-0", Start: time.Now()}})
	opts := helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("message", "before")}}}
	steps := func(out helm.Outcome) []helm.Action {
		var a []helm.Action
		for _, s := range out.Steps {
			a = append(a, s.Action)
		}
		return a
	}
	// unlocked checks a revision was unlocked (failed), then left as the
	// action after it leaves it (status).
	unlocked := func(name string, rev int, was string, status rcommon.Status) {
		t.Helper()
		r, err := helmStorage(t, ns).Get(name, rev)
		if err != nil {
			t.Fatal(err)
		}
		info := r.(*releasev1.Release).Info
		if want := "Release unlocked from stale '" + was + "' state"; info.Status != status || info.Description != want {
			t.Fatalf("%s v%d: %s %q, want %s %q", name, rev, info.Status, info.Description, status, want)
		}
	}

	rel := helm.Release{Name: "flux-upgrade", Namespace: ns}
	if _, err := m.Reconcile(ctx, rel, opts, helm.State{}); err != nil {
		t.Fatal(err)
	}
	leavePending(t, ns, rel.Name, 2, rcommon.StatusPendingUpgrade, helm.Holder{})
	opts.Values = []map[string]any{values("message", "after")}
	out, err := m.Reconcile(ctx, rel, opts, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	if got := steps(out); !slices.Equal(got, []helm.Action{helm.ActionRecover, helm.ActionUpgrade}) || out.Release.Revision != 3 || out.Release.Status != "deployed" {
		t.Fatalf("steps %v, release %+v; want recover and upgrade to a deployed revision 3", got, out.Release)
	}
	unlocked(rel.Name, 2, "pending-upgrade", rcommon.StatusFailed)

	rel = helm.Release{Name: "flux-install", Namespace: ns}
	pending := &releasev1.Release{Name: rel.Name, Namespace: ns, Version: 1,
		Info: &releasev1.Info{Status: rcommon.StatusPendingInstall, FirstDeployed: time.Now(), LastDeployed: time.Now()}}
	if err := helmStorage(t, ns).Create(pending); err != nil {
		t.Fatal(err)
	}
	out, err = m.Reconcile(ctx, rel, opts, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	// No revision was ever deployed: released again with an upgrade over
	// the unlocked (failed) one, as helm-controller releases it.
	if got := steps(out); !slices.Equal(got, []helm.Action{helm.ActionRecover, helm.ActionUpgrade}) || out.Release.Revision != 2 || out.Release.Status != "deployed" {
		t.Fatalf("steps %v, release %+v; want recover and upgrade to a deployed revision 2", got, out.Release)
	}
	// Helm's upgrade supersedes the failed revision it upgraded.
	unlocked(rel.Name, 1, "pending-install", rcommon.StatusSuperseded)
}

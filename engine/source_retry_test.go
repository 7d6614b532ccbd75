package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

// TestSourceRetryBacksOff checks Flux's retry of a failed source: a
// GitRepository with an interval of an hour whose repository does not
// exist yet retries with the controller's exponential backoff, so it is
// Ready within seconds of the repository appearing; a stalled one is not
// retried; a success requeues after the interval only.
//
// The reconcile counts come from gotk_reconcile_duration_seconds. A third
// source that keeps failing is the clock: "while it retried n times, the
// other did not run" needs no timed assertion.
func TestSourceRetryBacksOff(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	reg := prometheus.NewRegistry()
	startEngine(t, engine.Options{Registry: reg})

	later := &sourcev1.GitRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: ns},
		Spec: sourcev1.GitRepositorySpec{
			URL: srv.URL("later.git"), Interval: metav1.Duration{Duration: time.Hour},
			Reference: &sourcev1.GitRepositoryRef{Branch: "main"},
		},
	}
	clock := later.DeepCopy()
	clock.Name, clock.Spec.URL = "clock", srv.URL("never.git")
	stuck := later.DeepCopy()
	stuck.Name = "stuck"
	stuck.Spec.RecurseSubmodules = true // unsupported: stalls
	for _, o := range []*sourcev1.GitRepository{later, clock, stuck} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	waitFor(t, later, readyIs(later, false), "Ready=False")
	if conditions.IsStalled(later) {
		t.Fatalf("a missing repository is not a stalled source: %+v", later.Status.Conditions)
	}
	if msg := conditions.GetMessage(later, meta.ReadyCondition); !strings.Contains(msg, "GitRepository/"+ns+"/later") {
		t.Fatalf("message %q should name the object", msg)
	}
	waitFor(t, stuck, func() bool { return conditions.IsStalled(stuck) }, "Stalled=True")
	awaitRuns(t, reg, ns, "stuck", 1)

	// While the failing clock retries twice, the stalled source is not
	// reconciled again and the failing one is.
	stuckRuns, laterRuns := runs(t, reg, ns, "stuck"), runs(t, reg, ns, "later")
	awaitRuns(t, reg, ns, "clock", runs(t, reg, ns, "clock")+2)
	if n := runs(t, reg, ns, "stuck"); n != stuckRuns {
		t.Errorf("stalled source reconciled %d more times; it waits for a spec change", n-stuckRuns)
	}
	if n := runs(t, reg, ns, "later"); n <= laterRuns {
		t.Errorf("failed source not retried while the clock retried twice (%d reconciles)", n)
	}
	if stuck.Status.ObservedGeneration != stuck.Generation {
		t.Errorf("stalled source: observedGeneration %d, generation %d", stuck.Status.ObservedGeneration, stuck.Generation)
	}

	// The repository appears: the backoff, not the hour, brings it in.
	repo, err := srv.Repo("later.git")
	if err != nil {
		t.Fatal(err)
	}
	sha, err := repo.Commit("main", map[string]string{"cm.yaml": "kind: ConfigMap\n"}, "one")
	if err != nil {
		t.Fatal(err)
	}
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(pollCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(later), later); err != nil {
			return false, err
		}
		return conditions.IsReady(later), nil
	}); err != nil {
		t.Fatalf("GitRepository with interval 1h not Ready within 60s of its repository appearing: %+v", later.Status.Conditions)
	}
	if a := later.Status.Artifact; a == nil || a.Revision != "main@sha1:"+sha {
		t.Fatalf("artifact %+v, want revision main@sha1:%s", a, sha)
	}

	// A success requeues after the interval: no more reconciles while the
	// clock keeps failing.
	awaitReadyRecorded(t, reg, ns, "later")
	laterRuns = runs(t, reg, ns, "later")
	awaitRuns(t, reg, ns, "clock", runs(t, reg, ns, "clock")+1)
	if n := runs(t, reg, ns, "later"); n != laterRuns {
		t.Errorf("ready source reconciled %d more times before its interval", n-laterRuns)
	}
}

// runs returns how many reconciles of the GitRepository the engine
// recorded in gotk_reconcile_duration_seconds.
func runs(t *testing.T, reg *prometheus.Registry, ns, name string) uint64 {
	t.Helper()
	n, _ := gitRepositorySeries(t, reg, ns, name)
	return n
}

// gitRepositorySeries returns the GitRepository's reconcile count and
// whether gotk_reconcile_condition holds Ready=True for it.
func gitRepositorySeries(t *testing.T, reg *prometheus.Registry, ns, name string) (count uint64, ready bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["kind"] != sourcev1.GitRepositoryKind || l["namespace"] != ns || l["name"] != name {
				continue
			}
			switch f.GetName() {
			case "gotk_reconcile_duration_seconds":
				count = m.GetHistogram().GetSampleCount()
			case "gotk_reconcile_condition":
				if l["type"] == meta.ReadyCondition && l["status"] == string(metav1.ConditionTrue) && m.GetGauge().GetValue() == 1 {
					ready = true
				}
			}
		}
	}
	return count, ready
}

// awaitRuns waits until the GitRepository was reconciled at least n times.
func awaitRuns(t *testing.T, reg *prometheus.Registry, ns, name string, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return runs(t, reg, ns, name) >= n, nil
	}); err != nil {
		t.Fatalf("GitRepository %s/%s: %d reconciles, want %d", ns, name, runs(t, reg, ns, name), n)
	}
}

// awaitReadyRecorded waits until the reconcile that made the GitRepository
// Ready is in the metrics, which it enters after the status patch.
func awaitReadyRecorded(t *testing.T, reg *prometheus.Registry, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		_, ready := gitRepositorySeries(t, reg, ns, name)
		return ready, nil
	}); err != nil {
		t.Fatalf("GitRepository %s/%s: Ready=True never recorded in metrics", ns, name)
	}
}

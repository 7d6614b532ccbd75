package helm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// TestResumedHolderDoesNotOverwriteTheNewHolder is issue #14's takeover:
// holder a is paused in the middle of an upgrade (its wait for a
// Deployment, which envtest's missing controllers leave unready until the
// test marks it available), b takes the release over and recovers a's
// pending revision, then a resumes and goes on to record its upgrade. a's
// writes must be refused: the records stay exactly as b wrote them.
func TestResumedHolderDoesNotOverwriteTheNewHolder(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	rel := helm.Release{Name: "fenced", Namespace: ns}
	a := newManager(t, helm.Options{Holder: helm.Holder{ID: "a", Start: time.Now()}})
	first := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("deployment", true)}, Wait: helm.WaitNone}
	if _, err := a.Install(ctx, rel, helm.InstallOptions{Spec: first}); err != nil {
		t.Fatal(err)
	}

	second := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("deployment", true, "image", "registry.example/app:2")}, Timeout: time.Minute}
	upgraded := make(chan error, 1)
	go func() {
		_, err := a.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: second})
		upgraded <- err
	}()
	// a has stored revision 2 pending and applied its objects: it waits.
	waitUntil(t, "a's upgrade to wait for its Deployment", func() bool {
		var d appsDeployment
		err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fenced"}, &d.Deployment)
		return err == nil && d.Spec.Template.Spec.Containers[0].Image == "registry.example/app:2" &&
			releaseSecrets(t, ns, "fenced")["2"].Labels["status"] == "pending-upgrade"
	})

	// b owns the release now and takes a for dead: it recovers revision 2
	// and rolls back to revision 1.
	b := newManager(t, helm.Options{
		Holder:      helm.Holder{ID: "b", Start: time.Now()},
		HolderAlive: func(h helm.Holder) bool { return h.ID != "a" },
	})
	out, err := b.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: first}, helm.State{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Steps) != 2 || out.Steps[0].Action != helm.ActionRecover || out.Steps[1].Action != helm.ActionRollback || out.Release.Status != "deployed" {
		t.Fatalf("b's outcome %+v", out)
	}
	byB := releaseSecrets(t, ns, "fenced")

	// a resumes: its wait ends and it records its upgrade.
	markDeploymentAvailable(ctx, t, ns, "fenced")
	err = <-upgraded
	if !errors.Is(err, helm.ErrRecordConflict) {
		t.Fatalf("a's upgrade: %v, want ErrRecordConflict", err)
	}
	mustContain(t, err, "helm upgrade "+ns+"/fenced", "revision 1 of release fenced")
	after := releaseSecrets(t, ns, "fenced")
	if len(after) != len(byB) {
		t.Fatalf("revisions %d after a resumed, %d as b left them", len(after), len(byB))
	}
	for v, s := range byB {
		if got := after[v]; got.ResourceVersion != s.ResourceVersion {
			t.Errorf("revision %s was written after b: status %s (holder %s), b left %s",
				v, got.Labels["status"], got.Labels[helm.LabelHolder], s.Labels["status"])
		}
	}
	for v, s := range after {
		if st := s.Labels["status"]; (st == "deployed") != (v == "3") {
			t.Errorf("revision %s is %s; b's rollback, revision 3, must be the one deployed", v, st)
		}
	}
}

// TestFenceRefusesTheFirstWrite: a fence that refuses stops an install
// before its first write, the pending revision; nothing is written. And it
// stops an uninstall before it deletes anything.
func TestFenceRefusesTheFirstWrite(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	rel := helm.Release{Name: "refused", Namespace: ns}
	lost := errors.New("lease lost")
	var asked []helm.Release
	var mu sync.Mutex
	m := newManager(t, helm.Options{Fence: func(_ context.Context, r helm.Release) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r)
		return lost
	}})
	out, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: helm.Spec{Chart: ociChart("demo")}}, helm.State{})
	if !errors.Is(err, lost) {
		t.Fatalf("install: %v, want the fence's error", err)
	}
	mustContain(t, err, "helm install "+ns+"/refused", "fence refused writing sh.helm.release.v1.refused.v1")
	if len(asked) != 1 || asked[0] != rel {
		t.Fatalf("fence asked for %v, want once for %v", asked, rel)
	}
	if secs := releaseSecrets(t, ns, "refused"); len(secs) != 0 {
		t.Fatalf("%d release Secrets written", len(secs))
	}
	if _, ok := configMapMessage(t, ns, "refused"); ok {
		t.Fatal("the chart's ConfigMap was applied")
	}
	if out.State.InstallFailures != 0 {
		t.Fatalf("a refused write counted as a failed install: %+v", out.State)
	}

	// A fence that agrees is asked before each write: the pending
	// revision, then the deployed one.
	asked, lost = nil, nil
	if _, err := m.Install(ctx, rel, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("demo")}}); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 {
		t.Fatalf("fence asked %d times, want 2", len(asked))
	}

	// Helm's uninstall only logs a refused write of the uninstalling record
	// and goes on deleting: the objects stay as well as the records.
	lost = errors.New("lease lost again")
	if _, err := m.Uninstall(ctx, rel, helm.UninstallOptions{}); !errors.Is(err, lost) {
		t.Fatalf("uninstall: %v, want the fence's error", err)
	}
	if secs := releaseSecrets(t, ns, "refused"); len(secs) != 1 || secs["1"].Labels["status"] != "deployed" {
		t.Fatalf("release Secrets after a refused uninstall: %d", len(secs))
	}
	if _, ok := configMapMessage(t, ns, "refused"); !ok {
		t.Fatal("a refused uninstall deleted the chart's ConfigMap")
	}
}

// TestReleaseRecordRequests counts the requests on release Secrets: the
// preconditions cost none (the resourceVersions come from the reads Helm
// does anyway).
func TestReleaseRecordRequests(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	var mu sync.Mutex
	counts := map[string]int{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if verb := r.Method; strings.Contains(r.URL.Path, "/secrets") {
				if verb == http.MethodGet && strings.HasSuffix(r.URL.Path, "/secrets") {
					verb = "LIST"
				}
				mu.Lock()
				counts[verb]++
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	m, err := helm.New(cfg, helm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel := helm.Release{Name: "counted", Namespace: ns}
	take := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		c := counts
		counts = map[string]int{}
		return c
	}
	spec := helm.Spec{Chart: ociChart("demo")}
	for _, step := range []struct {
		name string
		run  func() error
		want map[string]int
	}{
		{"install", func() error { _, err := m.Install(ctx, rel, helm.InstallOptions{Spec: spec}); return err },
			map[string]int{"LIST": 1, "POST": 1, "PUT": 1}},
		{"upgrade", func() error {
			_, err := m.Upgrade(ctx, rel, helm.UpgradeOptions{Spec: helm.Spec{Chart: spec.Chart, Values: []map[string]any{values("message", "two")}}})
			return err
		}, map[string]int{"LIST": 1, "POST": 1, "PUT": 2}},
		{"uninstall", func() error { _, err := m.Uninstall(ctx, rel, helm.UninstallOptions{}); return err },
			map[string]int{"LIST": 1, "PUT": 1, "GET": 2, "DELETE": 2}},
	} {
		take()
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := take()
		t.Logf("%s: %v", step.name, got)
		if len(got) != len(step.want) {
			t.Errorf("%s: requests %v, want %v", step.name, got, step.want)
			continue
		}
		for k, n := range step.want {
			if got[k] != n {
				t.Errorf("%s: requests %v, want %v", step.name, got, step.want)
				break
			}
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

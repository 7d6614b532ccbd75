package helm_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/apply/helm"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// requestLog records the requests that reach the API server through a
// rest.Config.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD path"
}

func (l *requestLog) config() *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
			l.mu.Unlock()
			return next.RoundTrip(r)
		})
	})
	return cfg
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (l *requestLog) reset() {
	l.mu.Lock()
	l.reqs = nil
	l.mu.Unlock()
}

// count is the number of requests of method whose path contains every
// part.
func (l *requestLog) count(method string, parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, r := range l.reqs {
		if !strings.HasPrefix(r, method+" ") {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// A fresh install asks the API server neither for the release's history
// nor whether its objects exist once the Cache's watches have listed, and
// writes its release record once; an object that exists without Helm's
// ownership is still refused, and left as it was.
func TestCacheAnswersWhatDoesNotExist(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	taken := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Data:       map[string]string{"message": "mine"},
	}
	if err := cp.Client.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	var log requestLog
	c, m := cachedManager(t, ctx, log.config(), helm.Options{PendingAfter: time.Minute})
	spec := helm.Spec{Chart: ociChart("demo")}

	// The first installs start the ConfigMaps' watch; once it has listed,
	// an install reads nothing.
	answered := false
	for i := 0; i < 40 && !answered; i++ {
		log.reset()
		rel := helm.Release{Name: "fresh-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Namespace: ns}
		res, err := m.Install(ctx, rel, helm.InstallOptions{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision != 1 || res.Status != "deployed" {
			t.Fatalf("install %s: %+v", rel.Name, res)
		}
		gets := log.count("GET", "/configmaps/"+rel.Name)
		lists := log.count("GET", "/secrets")
		if gets == 0 && lists == 0 {
			answered = true
			if n := log.count("POST", "/secrets"); n != 1 {
				t.Errorf("install %s created %d release Secrets, want 1 (the revision written once, deployed)", rel.Name, n)
			}
			if n := log.count("PUT", "/secrets"); n != 0 {
				t.Errorf("install %s updated release Secrets %d times, want 0", rel.Name, n)
			}
			if s := releaseSecrets(t, ns, rel.Name)["1"]; s.Labels["status"] != "deployed" {
				t.Errorf("release %s v1 status %q", rel.Name, s.Labels["status"])
			}
		}
		if i > 0 && !answered {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !answered {
		t.Fatal("no install was answered from the cache")
	}
	if c.Answered() == 0 {
		t.Error("Answered() = 0")
	}

	// The watch listed "taken": Helm reads it and, told not to take
	// ownership, refuses it.
	log.reset()
	_, err := m.Install(ctx, helm.Release{Name: "taken", Namespace: ns}, helm.InstallOptions{Spec: spec, DisableTakeOwnership: true})
	if err == nil || !strings.Contains(err.Error(), "cannot be imported") {
		t.Fatalf("install over an object Helm does not own: %v", err)
	}
	if log.count("GET", "/configmaps/taken") != 1 {
		t.Errorf("the existing object was not read from the API server: %v", log.reqs)
	}
	var got corev1.ConfigMap
	if err := cp.Client.Get(ctx, clientKey(ns, "taken"), &got); err != nil {
		t.Fatal(err)
	}
	if got.Data["message"] != "mine" || len(got.Annotations) != 0 {
		t.Fatalf("the refused object changed: %v %v", got.Data, got.Annotations)
	}

	// Uninstalled and installed again: the history is read while the
	// watch may still hold the deleted records, and the install works.
	rel := helm.Release{Name: "again", Namespace: ns}
	for i := 0; i < 2; i++ {
		if _, err := m.Install(ctx, rel, helm.InstallOptions{Spec: spec}); err != nil {
			t.Fatalf("install %d: %v", i, err)
		}
		if _, err := m.Uninstall(ctx, rel, helm.UninstallOptions{}); err != nil {
			t.Fatalf("uninstall %d: %v", i, err)
		}
	}
}

// With PendingAfter, an install done sooner writes its record once,
// deployed; one that runs longer shows pending-install while it runs, as
// with Helm, and ends failed.
func TestPendingRecordOnlyForLongActions(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	var log requestLog
	m, err := helm.New(log.config(), helm.Options{PendingAfter: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Install(ctx, helm.Release{Name: "quick", Namespace: ns}, helm.InstallOptions{Spec: helm.Spec{Chart: ociChart("demo")}})
	if err != nil || res.Status != "deployed" {
		t.Fatalf("quick install: %+v %v", res, err)
	}
	if p, u := log.count("POST", "/secrets"), log.count("PUT", "/secrets"); p != 1 || u != 0 {
		t.Fatalf("quick install wrote its record with %d creates and %d updates, want 1 and 0", p, u)
	}

	// A Deployment never becomes ready on a plain API server.
	slow := helm.Release{Name: "slow", Namespace: ns}
	spec := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{values("deployment", true)}, Timeout: 4 * time.Second}
	done := make(chan error, 1)
	go func() {
		_, err := m.Install(ctx, slow, helm.InstallOptions{Spec: spec})
		done <- err
	}()
	sawPending := false
	for !sawPending {
		select {
		case err := <-done:
			t.Fatalf("install ended (%v) before its pending record was seen", err)
		case <-time.After(100 * time.Millisecond):
		}
		sawPending = releaseSecrets(t, ns, "slow")["1"].Labels["status"] == "pending-install"
	}
	if err := <-done; err == nil {
		t.Fatal("install of a Deployment that never becomes ready succeeded")
	}
	if st := releaseSecrets(t, ns, "slow")["1"].Labels["status"]; st != "failed" {
		t.Fatalf("slow release v1 status %q after the timeout, want failed", st)
	}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestKnownRevisionConfirmedFromLabels checks ReconcileOptions.Known: a
// release whose latest record is the caller's known revision, deployed,
// of the same chart and values, is confirmed without a request; any other
// answer of the labels (values changed, a revision written by someone
// else, a Known that is stale) reads the records as before.
func TestKnownRevisionConfirmedFromLabels(t *testing.T) {
	ctx := testContext(t)
	ns := cp.Namespace(t)
	var log requestLog
	_, m := cachedManager(t, ctx, log.config(), helm.Options{})
	rel := helm.Release{Name: "known", Namespace: ns}
	spec := helm.Spec{Chart: ociChart("demo"), Values: []map[string]any{{"message": "one"}}}
	first, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec}, helm.State{})
	if err != nil || first.Release.Revision != 1 {
		t.Fatalf("install: %+v %v", first.Release, err)
	}
	known := first.Release

	// The watch sees the record within moments; then nothing is read.
	var out helm.Outcome
	confirmed := false
	for i := 0; i < 50 && !confirmed; i++ {
		log.reset()
		if out, err = m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec, Known: &known}, first.State); err != nil {
			t.Fatal(err)
		}
		confirmed = len(log.reqs) == 0
		if !confirmed {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !confirmed {
		t.Fatalf("a release in sync was never confirmed without requests: %v", log.reqs)
	}
	if out.Next.Kind != helm.NextDone || len(out.Steps) != 0 || out.Release.Revision != 1 || out.Release.Chart != known.Chart ||
		!out.Release.LastDeployed.Equal(known.LastDeployed) || out.State.Digest != first.State.Digest {
		t.Fatalf("confirmed outcome = %+v, want release %+v done", out, known)
	}

	// Values changed: the digest label no longer matches, so it upgrades.
	spec2 := helm.Spec{Chart: spec.Chart, Values: []map[string]any{{"message": "two"}}}
	up, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec2, Known: &known}, first.State)
	if err != nil || up.Release.Revision != 2 || len(up.Steps) != 1 || up.Steps[0].Action != helm.ActionUpgrade {
		t.Fatalf("upgrade with a stale Known: %+v %v", up, err)
	}

	// Back to the first values, with the caller still knowing revision 1:
	// the latest record is 2, so the records are read and it upgrades to 3.
	log.reset()
	back, err := m.Reconcile(ctx, rel, helm.ReconcileOptions{Spec: spec, Known: &known}, up.State)
	if err != nil || back.Release.Revision != 3 {
		t.Fatalf("reconcile with Known older than the latest record: %+v %v", back.Release, err)
	}
	if log.count("GET", "/secrets") == 0 {
		t.Errorf("a stale Known was trusted: no record read (%v)", log.reqs)
	}
}

// cachedManager starts a Cache on cfg until the test ends and returns it
// with a Manager that uses it.
func cachedManager(t *testing.T, ctx context.Context, cfg *rest.Config, opts helm.Options) (*helm.Cache, *helm.Manager) {
	t.Helper()
	c, err := helm.NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	opts.Cache = c
	m, err := helm.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	notifyv1 "github.com/fluxcd/notification-controller/api/v1"
	notifyv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
)

// hookServer is a real HTTP endpoint that records the Flux events it
// receives and, with a key, checks their X-Signature as a receiver would.
type hookServer struct {
	*httptest.Server
	mu     sync.Mutex
	events []eventv1.Event
	bad    int
}

func newHookServer(t *testing.T, key string, code int) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if key != "" {
			m := hmac.New(sha256.New, []byte(key))
			m.Write(body)
			if r.Header.Get("X-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) {
				h.bad++
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		var ev eventv1.Event
		if err := json.Unmarshal(body, &ev); err == nil {
			h.events = append(h.events, ev)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) find(match func(eventv1.Event) bool) *eventv1.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if match(e) {
			return &e
		}
	}
	return nil
}

func (h *hookServer) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

func (h *hookServer) badCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bad
}

func createObjects(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// eventNote returns the note of a Kubernetes Event about kind/name in ns
// whose note contains want, or "".
func eventNote(t *testing.T, ns, kind, name, want string) string {
	t.Helper()
	var list eventsv1.EventList
	if err := cp.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && strings.Contains(e.Note, want) {
			return e.Note
		}
	}
	return ""
}

func TestAlertSendsKustomizationEventsToAGenericHMACProvider(t *testing.T) {
	ns := cp.Namespace(t)
	hook := newHookServer(t, "hmac-key", http.StatusOK)
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	createObjects(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
			StringData: map[string]string{"address": hook.URL + "/flux", "token": "hmac-key", "headers": "X-Team: platform\n"}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "generic-hmac", SecretRef: &meta.LocalObjectReference{Name: "hook"}}},
		&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
			// Flux 2.10 stores Alerts as v1, which has no spec.summary
			// (the API server prunes it): the summary goes in eventMetadata.
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "hook"},
				EventMetadata: map[string]string{"env": "test", "summary": "cluster one"},
				EventSources:  []notifyv1.CrossNamespaceObjectReference{{Kind: "Kustomization", Name: "*", MatchLabels: map[string]string{"team": "a"}}}}},
	)
	gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns)})
	matched := kustomization(ns, "matched", "apps", "./deploy")
	matched.Labels = map[string]string{"team": "a"}
	other := kustomization(ns, "other", "apps", "./deploy")
	other.Labels = map[string]string{"team": "b"}
	broken := kustomization(ns, "broken", "apps", "./nowhere")
	broken.Labels = map[string]string{"team": "a"}
	createObjects(t, matched, other, broken)

	waitFor(t, matched, readyIs(matched, true), "Ready=True")
	var got *eventv1.Event
	eventually(t, 90*time.Second, "the matched Kustomization's event reached the provider", func() bool {
		got = hook.find(func(e eventv1.Event) bool {
			return e.InvolvedObject.Name == "matched" && e.Reason == meta.ReconciliationSucceededReason
		})
		return got != nil
	})
	if got.InvolvedObject.Kind != "Kustomization" || got.Severity != "info" || got.ReportingController != "kustomize-controller" ||
		got.Metadata["summary"] != "cluster one" || got.Metadata["env"] != "test" ||
		got.Metadata["revision"] != matched.Status.LastAppliedRevision {
		t.Fatalf("event %+v", got)
	}
	eventually(t, 90*time.Second, "the broken Kustomization's error reached the provider", func() bool {
		return hook.find(func(e eventv1.Event) bool { return e.InvolvedObject.Name == "broken" && e.Severity == "error" }) != nil
	})
	waitFor(t, other, readyIs(other, true), "Ready=True")
	if hook.find(func(e eventv1.Event) bool { return e.InvolvedObject.Name == "other" }) != nil {
		t.Fatal("an object without the Alert's labels was sent")
	}
	if bad := hook.badCount(); bad != 0 {
		t.Fatalf("%d requests with a bad signature", bad)
	}
}

func TestProviderSecretErrorsAndFailingProviderAreReported(t *testing.T) {
	ns := cp.Namespace(t)
	failing := newHookServer(t, "", http.StatusInternalServerError)
	startEngine(t, engine.Options{Destinations: loopbackDestinations, Notify: engine.NotifyOptions{Backoff: 10 * time.Millisecond}})
	createObjects(t,
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "no-secret", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "slack", SecretRef: &meta.LocalObjectReference{Name: "absent"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bad-headers", Namespace: ns},
			StringData: map[string]string{"address": "https://example.com", "headers": "[not, a, map]"}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "bad-headers", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "generic", SecretRef: &meta.LocalObjectReference{Name: "bad-headers"}}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "telegram", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "telegram", Address: "https://example.com"}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "failing", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "generic", Address: failing.URL}},
		&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "to-failing", Namespace: ns},
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "failing"},
				EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: "Kustomization", Name: "*"}}}},
		&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "bad-regex", Namespace: ns},
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "failing"}, ExclusionList: []string{"(oops"},
				EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: "Kustomization", Name: "*"}}}},
	)
	for _, c := range []struct{ kind, name, want string }{
		{"Provider", "no-secret", "Secret " + ns + "/absent"},
		{"Provider", "bad-headers", "Secret " + ns + "/bad-headers key 'headers'"},
		{"Provider", "telegram", "UnsupportedField"},
		{"Alert", "bad-regex", `spec.exclusionList[0] "(oops"`},
	} {
		eventually(t, 90*time.Second, c.kind+"/"+c.name+" reported "+c.want, func() bool {
			if c.want == "UnsupportedField" {
				return eventNote(t, ns, c.kind, c.name, "spec.type telegram") != ""
			}
			return eventNote(t, ns, c.kind, c.name, c.want) != ""
		})
	}
	gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns)})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	createObjects(t, ks)
	waitFor(t, ks, readyIs(ks, true), "Ready=True despite the failing provider")
	eventually(t, 90*time.Second, "the Alert reported the provider's 500 after the retries", func() bool {
		return eventNote(t, ns, "Alert", "to-failing", "failed after 4 attempt(s): POST to provider address: provider answered 500 Internal Server Error") != ""
	})
	if n := failing.count(); n < 4 {
		t.Fatalf("the failing provider got %d requests, want the retries", n)
	}
}

// webhookAddr returns a loopback address with a port free now.
func webhookAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func githubPush(t testing.TB, url, secret, delivery string) int {
	t.Helper()
	body := []byte(`{"ref":"refs/heads/main"}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestReceiverGitHubPushReconcilesTheNewRevision(t *testing.T) {
	ns := cp.Namespace(t)
	addr := webhookAddr(t)
	repo, gr := gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns)})
	startEngine(t, engine.Options{Destinations: loopbackDestinations, WebhookAddr: addr})
	rcv := &notifyv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns},
		Spec: notifyv1.ReceiverSpec{Type: "github", Events: []string{"push"}, SecretRef: &meta.LocalObjectReference{Name: "webhook-token"},
			Resources: []notifyv1.ReceiverResource{{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "*"}}}}}
	noToken := &notifyv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "no-token", Namespace: ns},
		Spec: notifyv1.ReceiverSpec{Type: "generic", SecretRef: &meta.LocalObjectReference{Name: "absent"},
			Resources: []notifyv1.ReceiverResource{{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "apps"}}}}}
	quay := noToken.DeepCopy()
	quay.Name, quay.Spec.Type = "quay", "quay"
	ks := kustomization(ns, "apps", "apps", "./deploy")
	createObjects(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "webhook-token", Namespace: ns}, StringData: map[string]string{"token": "gh-secret"}},
		rcv, noToken, quay, ks)

	waitFor(t, rcv, readyIs(rcv, true), "Ready=True")
	sum := sha256.Sum256([]byte("gh-secret" + rcv.Name + ns))
	if want := "/hook/" + hex.EncodeToString(sum[:]); rcv.Status.WebhookPath != want {
		t.Fatalf("webhookPath %q, want Flux's %q", rcv.Status.WebhookPath, want)
	}
	waitFor(t, noToken, readyIs(noToken, false), "Ready=False")
	if c := conditions.Get(noToken, meta.ReadyCondition); c.Reason != notifyv1.TokenNotFoundReason || !strings.Contains(c.Message, "Secret "+ns+"/absent") {
		t.Fatalf("no-token Ready: %+v", c)
	}
	waitFor(t, quay, func() bool { return conditions.IsStalled(quay) }, "Stalled")
	if c := conditions.Get(quay, meta.ReadyCondition); c.Reason != engine.UnsupportedFieldReason || !strings.Contains(c.Message, "spec.type quay") {
		t.Fatalf("quay Ready: %+v", c)
	}
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	first := ks.Status.LastAppliedRevision

	sha, err := repo.Commit("main", map[string]string{"deploy/a.yaml": configMap("a", ns), "deploy/b.yaml": configMap("b", ns)}, "second")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr + rcv.Status.WebhookPath
	// A wrong signature is refused and triggers nothing.
	if code := githubPush(t, url, "wrong", "d0"); code != http.StatusUnauthorized {
		t.Fatalf("wrong signature answered %d", code)
	}
	if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(gr), gr); err != nil {
		t.Fatal(err)
	}
	if _, ok := gr.Annotations[meta.ReconcileRequestAnnotation]; ok {
		t.Fatal("a refused webhook annotated the GitRepository")
	}
	if code := githubPush(t, url, "gh-secret", "d1"); code != http.StatusOK {
		t.Fatalf("signed push answered %d", code)
	}
	if code := githubPush(t, url, "gh-secret", "d1"); code != http.StatusConflict {
		t.Fatalf("replayed delivery answered %d", code)
	}
	want := "main@sha1:" + sha
	waitFor(t, ks, func() bool { return ks.Status.LastAppliedRevision == want }, fmt.Sprintf("revision %s applied (was %s)", want, first))
}

func TestReceiverAnnotatesResourcesByNameAndLabels(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	addr := webhookAddr(t)
	startEngine(t, engine.Options{Destinations: loopbackDestinations, WebhookAddr: addr})
	repo := func(name string, labels map[string]string) *sourcev1.GitRepository {
		return &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: sourcev1.GitRepositorySpec{URL: "http://127.0.0.1:1/none.git", Interval: metav1.Duration{Duration: time.Hour}}}
	}
	a, b := repo("team-a", map[string]string{"team": "a"}), repo("team-b", map[string]string{"team": "b"})
	ks := kustomization(ns, "named", "team-a", "./")
	rcv := &notifyv1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns},
		Spec: notifyv1.ReceiverSpec{Type: "generic", SecretRef: &meta.LocalObjectReference{Name: "ci-token"},
			Resources: []notifyv1.ReceiverResource{
				{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "*", MatchLabels: map[string]string{"team": "a"}}},
				{CrossNamespaceObjectReference: notifyv1.CrossNamespaceObjectReference{Kind: "Kustomization", Name: "named"}},
			}}}
	createObjects(t, a, b, ks, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ci-token", Namespace: ns}, StringData: map[string]string{"token": "t"}}, rcv)
	waitFor(t, rcv, readyIs(rcv, true), "Ready=True")
	resp, err := http.Post("http://"+addr+rcv.Status.WebhookPath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook answered %d", resp.StatusCode)
	}
	for _, c := range []struct {
		obj  client.Object
		want bool
	}{{a, true}, {b, false}, {ks, true}} {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(c.obj), c.obj); err != nil {
			t.Fatal(err)
		}
		if _, got := c.obj.GetAnnotations()[meta.ReconcileRequestAnnotation]; got != c.want {
			t.Errorf("%s annotated: %v, want %v", c.obj.GetName(), got, c.want)
		}
	}
}

func TestGitHubProviderSetsTheCommitStatusOfTheAppliedRevision(t *testing.T) {
	ns := cp.Namespace(t)
	type status struct{ path, auth, state, context string }
	var mu sync.Mutex
	var got []status
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, status{r.URL.Path, r.Header.Get("Authorization"), body["state"], body["context"]})
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer gh.Close()
	startEngine(t, engine.Options{Destinations: loopbackDestinations})
	createObjects(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gh-token", Namespace: ns}, StringData: map[string]string{"token": "ghp_x"}},
		&notifyv1beta3.Provider{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns},
			Spec: notifyv1beta3.ProviderSpec{Type: "github", Address: gh.URL + "/org/platform", SecretRef: &meta.LocalObjectReference{Name: "gh-token"}}},
		&notifyv1beta3.Alert{ObjectMeta: metav1.ObjectMeta{Name: "commits", Namespace: ns},
			Spec: notifyv1beta3.AlertSpec{ProviderRef: meta.LocalObjectReference{Name: "github"},
				EventSources: []notifyv1.CrossNamespaceObjectReference{{Kind: "Kustomization", Name: "apps"}}}},
	)
	time.Sleep(time.Second) // the Alert reaches the dispatcher before the first event
	gitSource(t, ns, "apps", map[string]string{"deploy/a.yaml": configMap("a", ns)})
	ks := kustomization(ns, "apps", "apps", "./deploy")
	createObjects(t, ks)
	waitFor(t, ks, readyIs(ks, true), "Ready=True")
	sha := strings.TrimPrefix(ks.Status.LastAppliedRevision, "main@sha1:")
	want := "/api/v3/repos/org/platform/statuses/" + sha
	eventually(t, 90*time.Second, "a success status on "+sha, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got {
			if s.path == want && s.state == "success" && s.auth == "Bearer ghp_x" && strings.HasPrefix(s.context, "kustomization/apps/") {
				return true
			}
		}
		return false
	})
}

package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recorder is a real HTTP server that keeps what it receives and answers
// with the codes it is told, in turn (then 200).
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []recorded
	codes []int
	// check, when set, validates a request as the real service would; a
	// failure is answered 401.
	check func(r *http.Request, body []byte) error
}

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

func newRecorder(t *testing.T, codes ...int) *recorder {
	rec := &recorder{codes: codes}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.reqs = append(rec.reqs, recorded{path: r.URL.EscapedPath(), header: r.Header.Clone(), body: body})
		if rec.check != nil {
			if err := rec.check(r, body); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		if len(rec.codes) > 0 {
			code := rec.codes[0]
			rec.codes = rec.codes[1:]
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) got() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func sampleEvent() *Event {
	return &Event{
		InvolvedObject:      corev1.ObjectReference{Kind: "Kustomization", Namespace: "apps", Name: "web", APIVersion: "kustomize.toolkit.fluxcd.io/v1"},
		Severity:            SeverityError,
		Timestamp:           metav1.NewTime(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)),
		Message:             "health check failed",
		Reason:              "HealthCheckFailed",
		Metadata:            map[string]string{"revision": "main@sha1:" + strings.Repeat("ab", 20), "summary": "prod"},
		ReportingController: "kustomize-controller",
		ReportingInstance:   "node-1",
	}
}

func send(t *testing.T, p Provider) error {
	t.Helper()
	s, err := newSender(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.post(context.Background(), sampleEvent())
}

func TestGenericPostsFluxPayload(t *testing.T) {
	rec := newRecorder(t)
	if err := send(t, Provider{Type: TypeGeneric, Address: rec.URL + "/hook", Headers: map[string]string{"X-Env": "prod"}}); err != nil {
		t.Fatal(err)
	}
	r := rec.got()[0]
	var got Event
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := sampleEvent()
	if got.InvolvedObject != want.InvolvedObject || got.Message != want.Message || got.Reason != want.Reason ||
		got.Severity != want.Severity || got.Metadata["revision"] != want.Metadata["revision"] || !got.Timestamp.Equal(&want.Timestamp) {
		t.Fatalf("payload = %s", r.body)
	}
	// Flux's field names, as a receiver parsing Flux's JSON expects.
	for _, k := range []string{`"involvedObject"`, `"reportingController":"kustomize-controller"`, `"severity":"error"`} {
		if !strings.Contains(string(r.body), k) {
			t.Errorf("payload lacks %s: %s", k, r.body)
		}
	}
	if r.header.Get("gotk-component") != "kustomize-controller" || r.header.Get("X-Env") != "prod" || r.header.Get(SignatureHeader) != "" {
		t.Errorf("headers = %v", r.header)
	}
}

func TestGenericHMACSignsTheBody(t *testing.T) {
	rec := newRecorder(t)
	key := "s3cret"
	rec.check = func(r *http.Request, body []byte) error {
		m := hmac.New(sha256.New, []byte(key))
		m.Write(body)
		if r.Header.Get("X-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			return errors.New("bad signature")
		}
		return nil
	}
	if err := send(t, Provider{Type: TypeGenericHMAC, Address: rec.URL, Token: key}); err != nil {
		t.Fatal(err)
	}
	err := send(t, Provider{Type: TypeGenericHMAC, Address: rec.URL, Token: "wrong"})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 401 || se.Temporary() {
		t.Fatalf("a wrong key must be refused by the receiver, got %v", err)
	}
	if _, err := newSender(Provider{Type: TypeGenericHMAC, Address: rec.URL}, nil); err == nil || !strings.Contains(err.Error(), "'token'") {
		t.Fatalf("generic-hmac without token: %v", err)
	}
}

func TestChatProviders(t *testing.T) {
	rec := newRecorder(t)
	for _, p := range []Provider{
		{Type: TypeSlack, Address: rec.URL + "/api/chat.postMessage", Channel: "ops", Username: "flux", Token: "xoxb-1"},
		{Type: TypeDiscord, Address: rec.URL + "/api/webhooks/1/tok", Username: "flux"},
		{Type: TypeMSTeams, Address: rec.URL + "/workflows/1"},
	} {
		if err := send(t, p); err != nil {
			t.Fatalf("%s: %v", p.Type, err)
		}
	}
	got := rec.got()
	var slack slackPayload
	if err := json.Unmarshal(got[0].body, &slack); err != nil {
		t.Fatal(err)
	}
	if slack.Channel != "ops" || slack.Username != "flux" || slack.Attachments[0].Color != "danger" ||
		slack.Attachments[0].AuthorName != "kustomization/web.apps" || got[0].header.Get("Authorization") != "Bearer xoxb-1" {
		t.Errorf("slack = %s %v", got[0].body, got[0].header)
	}
	if got[1].path != "/api/webhooks/1/tok/slack" || !strings.Contains(string(got[1].body), `"health check failed"`) {
		t.Errorf("discord: %s %s", got[1].path, got[1].body)
	}
	if !strings.Contains(string(got[2].body), `"application/vnd.microsoft.card.adaptive"`) || !strings.Contains(string(got[2].body), `"summary"`) {
		t.Errorf("msteams: %s", got[2].body)
	}
}

func TestAlertmanager(t *testing.T) {
	rec := newRecorder(t)
	if err := send(t, Provider{Type: TypeAlertmanager, Address: rec.URL + "/api/v2/alerts"}); err != nil {
		t.Fatal(err)
	}
	var alerts []amAlert
	if err := json.Unmarshal(rec.got()[0].body, &alerts); err != nil {
		t.Fatal(err)
	}
	a := alerts[0]
	if a.Labels["alertname"] != "FluxKustomizationHealthCheckFailed" || a.Labels["severity"] != "error" ||
		a.Labels["name"] != "web" || a.Annotations["summary"] != "prod" || a.Annotations["message"] != "health check failed" || a.EndsAt != nil {
		t.Fatalf("alert = %+v", a)
	}
}

func TestCommitStatusProviders(t *testing.T) {
	sha := strings.Repeat("ab", 20)
	cases := []struct {
		typ, path, auth, authValue, state string
	}{
		{TypeGitHub, "/api/v3/repos/org/app/statuses/" + sha, "Authorization", "Bearer tok", "failure"},
		{TypeGitLab, "/api/v4/projects/org%2Fapp/statuses/" + sha, "PRIVATE-TOKEN", "tok", "failed"},
		{TypeGitea, "/api/v1/repos/org/app/statuses/" + sha, "Authorization", "token tok", "failure"},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			rec := newRecorder(t)
			rec.check = func(r *http.Request, _ []byte) error {
				if r.Header.Get(c.auth) != c.authValue {
					return errors.New("bad credentials")
				}
				return nil
			}
			if err := send(t, Provider{Type: c.typ, Address: rec.URL + "/org/app.git", Token: "tok", UID: "u1"}); err != nil {
				t.Fatal(err)
			}
			r := rec.got()[0]
			if r.path != c.path {
				t.Fatalf("path = %s, want %s", r.path, c.path)
			}
			var body map[string]string
			_ = json.Unmarshal(r.body, &body)
			if body["state"] != c.state || !strings.HasPrefix(body["context"]+body["name"], "kustomization/web/") {
				t.Fatalf("body = %s", r.body)
			}
		})
	}
}

func TestCommitStatusSkipsEventsWithoutACommit(t *testing.T) {
	rec := newRecorder(t)
	s, err := newSender(Provider{Type: TypeGitHub, Address: rec.URL + "/org/app", Token: "tok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := sampleEvent()
	e.Metadata = map[string]string{"revision": "1.2.3"}
	if err := s.post(context.Background(), e); err != nil || len(rec.got()) != 0 {
		t.Fatalf("err %v, %d requests", err, len(rec.got()))
	}
}

// TestCommitStatusSkipsAReconcileInProgress: an event with reason
// Progressing (a change set, a wait) sets no commit status, as Flux's git
// providers skip it; the same event with a result does.
func TestCommitStatusSkipsAReconcileInProgress(t *testing.T) {
	rec := newRecorder(t)
	s, err := newSender(Provider{Type: TypeGitHub, Address: rec.URL + "/org/app", Token: "tok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := sampleEvent()
	e.Metadata = map[string]string{"revision": "main@sha1:" + strings.Repeat("ab", 20)}
	e.Reason = "Progressing"
	if err := s.post(context.Background(), e); err != nil || len(rec.got()) != 0 {
		t.Fatalf("Progressing: err %v, %d requests", err, len(rec.got()))
	}
	e.Reason = "ReconciliationSucceeded"
	if err := s.post(context.Background(), e); err != nil || len(rec.got()) != 1 {
		t.Fatalf("a result: err %v, %d requests", err, len(rec.got()))
	}
}

func TestNewSenderRejects(t *testing.T) {
	for _, c := range []struct {
		p    Provider
		want string
	}{
		{Provider{Type: "telegram", Address: "https://x"}, `provider type "telegram" is not supported`},
		{Provider{Type: TypeGeneric}, "no address"},
		{Provider{Type: TypeGeneric, Address: "ftp://x"}, "invalid address"},
		{Provider{Type: TypeGitHub, Address: "https://github.com/org", Token: "t"}, "repository's URL"},
		{Provider{Type: TypeGitLab, Address: "https://gitlab.com/org/app"}, "'token'"},
	} {
		if _, err := newSender(c.p, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.p, err, c.want)
		}
	}
}

func TestTransportErrorsDoNotLeakTheAddress(t *testing.T) {
	err := send(t, Provider{Type: TypeSlack, Address: "http://127.0.0.1:1/services/T000/SECRET", Timeout: time.Second})
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.HasPrefix(err.Error(), "POST to provider address: ") {
		t.Fatalf("err = %v", err)
	}
}

func TestProviderTLSUsesTheGivenCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	if err := send(t, Provider{Type: TypeGeneric, Address: srv.URL}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown CA must fail: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	if err := send(t, Provider{Type: TypeGeneric, Address: srv.URL, TLS: &tls.Config{RootCAs: pool}}); err != nil {
		t.Fatal(err)
	}
}

package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

type triggers struct {
	mu   sync.Mutex
	refs []types.NamespacedName
}

func (t *triggers) trigger(_ context.Context, ref types.NamespacedName) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refs = append(t.refs, ref)
	return nil
}

func (t *triggers) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.refs)
}

// startServer serves a Server on a real loopback port.
func startServer(t *testing.T, opts ServerOptions) (*Server, string, *triggers) {
	t.Helper()
	tr := &triggers{}
	opts.Trigger = tr.trigger
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Listener = ln
	s := NewServer(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, "http://" + ln.Addr().String(), tr
}

func githubSign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func post(t *testing.T, url string, body []byte, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWebhookPathIsFlux(t *testing.T) {
	// sha256("tok" + "name" + "ns"), as Flux's Receiver.GetWebhookPath.
	d := sha256.Sum256([]byte("toknamens"))
	if got := WebhookPath("tok", "name", "ns"); got != "/hook/"+hex.EncodeToString(d[:]) {
		t.Fatal(got)
	}
}

func TestGitHubReceiver(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, base, tr := startServer(t, ServerOptions{Registerer: reg})
	ref := types.NamespacedName{Namespace: "apps", Name: "gh"}
	path := WebhookPath("s3cret", ref.Name, ref.Namespace)
	s.SetReceiver(ref, path, Receiver{Type: ReceiverGitHub, Token: "s3cret", Events: []string{"push"}})
	body := []byte(`{"ref":"refs/heads/main","after":"abc"}`)
	gh := func(event, sig, delivery string) map[string]string {
		return map[string]string{"X-GitHub-Event": event, "X-Hub-Signature-256": sig, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
	}
	cases := []struct {
		name    string
		path    string
		body    []byte
		headers map[string]string
		code    int
	}{
		{"signed push", path, body, gh("push", githubSign("s3cret", body), "d1"), 200},
		{"replayed delivery", path, body, gh("push", githubSign("s3cret", body), "d1"), 409},
		{"ping", path, []byte(`{"zen":"x"}`), gh("ping", githubSign("s3cret", []byte(`{"zen":"x"}`)), "d2"), 200},
		{"event not in spec.events", path, body, gh("issues", githubSign("s3cret", body), "d3"), 400},
		{"wrong secret", path, body, gh("push", githubSign("other", body), "d4"), 401},
		{"missing signature", path, body, gh("push", "", "d5"), 401},
		{"body changed after signing", path, []byte(`{"ref":"refs/heads/evil"}`), gh("push", githubSign("s3cret", body), "d6"), 401},
		{"unknown path", "/hook/" + strings.Repeat("0", 64), body, gh("push", githubSign("s3cret", body), "d7"), 404},
	}
	for _, c := range cases {
		if got := post(t, base+c.path, c.body, c.headers); got != c.code {
			t.Errorf("%s: %d, want %d", c.name, got, c.code)
		}
	}
	if tr.count() != 1 {
		t.Fatalf("%d reconciles requested, want 1 (the signed push)", tr.count())
	}
	if v := testutil.ToFloat64(s.m.webhooks.WithLabelValues("401", "unauthorized")); v != 3 {
		t.Errorf("401 counted %v times", v)
	}
}

func TestGitLabHarborGenericHMACDockerHubReceivers(t *testing.T) {
	s, base, tr := startServer(t, ServerOptions{})
	set := func(name string, r Receiver) string {
		p := WebhookPath(r.Token, name, "apps")
		s.SetReceiver(types.NamespacedName{Namespace: "apps", Name: name}, p, r)
		return base + p
	}
	gl := set("gl", Receiver{Type: ReceiverGitLab, Token: "t1", Events: []string{"Push Hook"}})
	hb := set("hb", Receiver{Type: ReceiverHarbor, Token: "t2"})
	hm := set("hm", Receiver{Type: ReceiverGenericHMAC, Token: "t3"})
	dh := set("dh", Receiver{Type: ReceiverDockerHub, Token: "t4"})
	ge := set("ge", Receiver{Type: ReceiverGeneric, Token: "t5"})
	body := []byte(`{"push_data":{"tag":"v1"},"repository":{"repo_url":"https://hub.docker.com/r/x/y"}}`)
	cases := []struct {
		name    string
		url     string
		body    []byte
		headers map[string]string
		code    int
	}{
		{"gitlab", gl, body, map[string]string{"X-Gitlab-Token": "t1", "X-Gitlab-Event": "Push Hook"}, 200},
		{"gitlab wrong token", gl, body, map[string]string{"X-Gitlab-Token": "nope", "X-Gitlab-Event": "Push Hook"}, 401},
		{"gitlab other event", gl, body, map[string]string{"X-Gitlab-Token": "t1", "X-Gitlab-Event": "Tag Push Hook"}, 400},
		{"harbor", hb, body, map[string]string{"Authorization": "t2"}, 200},
		{"harbor no auth", hb, body, nil, 401},
		{"generic-hmac", hm, body, map[string]string{"X-Signature": githubSign("t3", body)}, 200},
		{"generic-hmac wrong", hm, body, map[string]string{"X-Signature": githubSign("t4", body)}, 401},
		{"dockerhub", dh, body, nil, 200},
		{"dockerhub not json", dh, []byte("<html>"), nil, 400},
		{"generic", ge, nil, nil, 200},
	}
	for _, c := range cases {
		if got := post(t, c.url, c.body, c.headers); got != c.code {
			t.Errorf("%s: %d, want %d", c.name, got, c.code)
		}
	}
	if tr.count() != 5 {
		t.Fatalf("%d reconciles requested, want 5", tr.count())
	}
}

func TestWebhookRejectsOversizedBodiesAndFloods(t *testing.T) {
	s, base, tr := startServer(t, ServerOptions{MaxBodyBytes: 1024, RatePerReceiver: 1, BurstPerReceiver: 5})
	p := WebhookPath("t", "g", "apps")
	s.SetReceiver(types.NamespacedName{Namespace: "apps", Name: "g"}, p, Receiver{Type: ReceiverGeneric, Token: "t"})
	if got := post(t, base+p, bytes.Repeat([]byte("x"), 4096), nil); got != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", got)
	}
	codes := map[int]int{}
	for range 50 {
		codes[post(t, base+p, nil, nil)]++
	}
	if codes[http.StatusTooManyRequests] < 40 || codes[200] > 6 {
		t.Fatalf("flood answered %v", codes)
	}
	if tr.count() != codes[200] {
		t.Fatalf("%d reconciles for %d accepted requests", tr.count(), codes[200])
	}
	if v := testutil.ToFloat64(s.m.webhooks.WithLabelValues("429", "rate limited")); int(v) != codes[429] {
		t.Fatalf("429 counted %v, answered %d", v, codes[429])
	}
	req, _ := http.NewRequest(http.MethodGet, base+p, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

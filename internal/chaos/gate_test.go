package chaos

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestGate: the gate passes requests, keeps the Host header, answers 500
// when failing, delays when slow, refuses connections when down and
// serves again on the same port when reopened.
func TestGate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "host="+r.Host)
	}))
	defer srv.Close()
	g, err := StartGate(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (int, string, error) {
		resp, err := c.Get(g.URL() + "/x")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, body, err := get(); err != nil || code != 200 || body != "host="+g.Addr() {
		t.Fatalf("open: %d %q %v, want 200 host=%s", code, body, err, g.Addr())
	}
	if err := g.Set(GateFailing, 0); err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(); err != nil || code != 500 {
		t.Fatalf("failing: %d %v, want 500", code, err)
	}
	if err := g.Set(GateSlow, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code, _, err := get(); err != nil || code != 200 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("slow: %d %v after %s, want 200 after 300ms", code, err, time.Since(start))
	}
	if err := g.Set(GateDown, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(); err == nil {
		t.Fatal("down: the request was answered")
	}
	if err := g.Set(GateOpen, 0); err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(); err != nil || code != 200 {
		t.Fatalf("reopened: %d %v, want 200", code, err)
	}
}

package cluster

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A server that is not a Kubernetes API server keeps its error answers'
// bodies: the tenant who named it reads only the code and the media type.
func TestWithheldTransport(t *testing.T) {
	const secret = "instance-identity-credentials-SECRET"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
		case "/none":
			w.Header()["Content-Type"] = nil
			w.WriteHeader(http.StatusInternalServerError)
		case "/status":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		default:
			w.Header().Set("Content-Type", "text/plain")
		}
		_, _ = io.WriteString(w, secret)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &withheldTransport{next: http.DefaultTransport}}
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/html":   {403, `answer withheld: HTTP 403 with Content-Type "text/html" is not a Kubernetes API answer`},
		"/none":   {500, `answer withheld: HTTP 500 with Content-Type "none"`},
		"/status": {404, `"reason":"NotFound"`},
		"/ok":     {200, secret}, // a success is the caller's to read (a pod's log is text/plain)
	} {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.code || !strings.Contains(string(b), want.body) {
			t.Errorf("%s: %d %q, want %d with %q", path, resp.StatusCode, b, want.code, want.body)
		}
		if path != "/ok" && strings.Contains(string(b), secret) {
			t.Errorf("%s: the body reached the caller: %q", path, b)
		}
	}
}

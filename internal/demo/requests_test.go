package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCountRequests(t *testing.T) {
	ev := func(stage, verb, user, uri, res, sub string) string {
		ref := ""
		if res != "" {
			ref = `,"objectRef":{"resource":"` + res + `","subresource":"` + sub + `"}`
		}
		return `{"stage":"` + stage + `","verb":"` + verb + `","requestURI":"` + uri + `","user":{"username":"` + user + `"}` + ref + "}\n"
	}
	lines := []string{
		ev("ResponseComplete", "patch", "cozy-aio", "/api/v1/namespaces/a/configmaps/x", "configmaps", ""),
		ev("ResponseComplete", "patch", "cozy-aio", "/api/v1/namespaces/a/configmaps/y", "configmaps", ""),
		ev("ResponseComplete", "patch", "cozy-aio", "/apis/helm.toolkit.fluxcd.io/v2/x/status", "helmreleases", "status"),
		ev("ResponseComplete", "get", "someone-else", "/api/v1/namespaces/a/configmaps/x", "configmaps", ""),
		ev("ResponseStarted", "watch", "cozy-aio", "/api/v1/secrets?watch=1", "secrets", ""),
		ev("ResponseComplete", "watch", "cozy-aio", "/api/v1/secrets?watch=1", "secrets", ""),
		ev("ResponseComplete", "get", "cozy-aio", "/version?timeout=32s", "", ""),
		"not json\n",
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	partial := ev("ResponseComplete", "create", "cozy-aio", "/api/v1/namespaces/a/events", "events", "")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")+partial[:20]), 0o644); err != nil {
		t.Fatal(err)
	}
	got, off, err := countRequests(path, 0, CozyUser)
	if err != nil {
		t.Fatal(err)
	}
	want := Requests{"patch configmaps": 2, "patch helmreleases/status": 1, "watch secrets": 1, "get /version": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: got %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if got.Writes("configmaps") != 2 || got.Writes("helmreleases") != 0 || got.Total() != 5 {
		t.Errorf("writes of configmaps %d (want 2), of helmreleases %d (want 0: status is a subresource), total %d (want 5)",
			got.Writes("configmaps"), got.Writes("helmreleases"), got.Total())
	}
	// The partly written line is counted once it is complete.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(partial[20:])
	f.Close()
	more, _, err := countRequests(path, off, CozyUser)
	if err != nil {
		t.Fatal(err)
	}
	if len(more) != 1 || more["create events"] != 1 {
		t.Errorf("from offset %d: got %v, want only the completed create of an event", off, more)
	}
	if l := got.Lines(10); len(l) != 4 || !strings.HasPrefix(l[0], "patch configmaps") || !strings.Contains(l[0], "0.20 per release") {
		t.Errorf("lines %q: want the largest first with its share per release", l)
	}
}

package helm

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

type countingResults struct{ n int }

func (c *countingResults) Increment(context.Context, string, string, string) { c.n++ }

// The 404s the Cache makes up are not counted as requests to the API
// server; every real one is.
func TestAnswersAreNotCountedAsRequests(t *testing.T) {
	next := &countingResults{}
	h := hiddenAnswers{next}
	answeredFromCache.Add(2)
	ctx := context.Background()
	h.Increment(ctx, "404", "GET", "host")
	h.Increment(ctx, "200", "GET", "host")
	h.Increment(ctx, "404", "GET", "host")
	h.Increment(ctx, "404", "GET", "host")
	if next.n != 2 {
		t.Fatalf("counted %d requests, want 2 (a 200 and the third 404)", next.n)
	}
}

func TestObjectPath(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dep := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	nsr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crb := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	for path, want := range map[string]struct {
		gvr      schema.GroupVersionResource
		ns, name string
		ok       bool
	}{
		"/api/v1/namespaces/a/configmaps/b":                        {cm, "a", "b", true},
		"/api/v1/namespaces/a/configmaps":                          {cm, "a", "", true},
		"/apis/apps/v1/namespaces/a/deployments/b":                 {dep, "a", "b", true},
		"/apis/apps/v1/namespaces/a/deployments/b/status":          {ok: false},
		"/api/v1/namespaces/a":                                     {nsr, "", "a", true},
		"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/x": {crb, "", "x", true},
		"/api":          {ok: false},
		"/apis/apps/v1": {ok: false},
		"/version":      {ok: false},
	} {
		gvr, ns, name, ok := objectPath(path)
		if ok != want.ok || (ok && (gvr != want.gvr || ns != want.ns || name != want.name)) {
			t.Errorf("%s: %v %q %q %v, want %+v", path, gvr, ns, name, ok, want)
		}
	}
}

// A store that has listed answers absence; what this process wrote since
// the list began stays known through a relist that missed it.
func TestKeySetKeepsRecentWrites(t *testing.T) {
	s := newKeySet()
	if s.absent("a", "b") {
		t.Fatal("absent before the list")
	}
	s.wrote("a", "b")
	_ = s.Replace(nil, "1")
	if s.absent("a", "b") {
		t.Fatal("a write this process made was lost by the list")
	}
	if !s.absent("a", "c") {
		t.Fatal("not absent after the list")
	}
	s.wrote("a", "")
	if s.absent("a", "c") {
		t.Fatal("absence answered right after a create whose name is unknown")
	}
	if !s.absent("z", "c") {
		t.Fatal("a create in one namespace hid absence in another")
	}
}

package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/internal/statuspage"
)

var fluxRead = rbacv1.PolicyRule{
	APIGroups: []string{"source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "source.extensions.fluxcd.io"},
	Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "patch"},
}

type pageClient struct {
	t     *testing.T
	base  string
	token string
}

func (c pageClient) do(method, path string, hdr map[string]string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c pageClient) get(path string, into any) {
	c.t.Helper()
	code, b := c.do(http.MethodGet, path, nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, into); err != nil {
		c.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// The status page off the loopback, under a prefix: no token, 401; a
// token of a user who reads one namespace sees only that namespace's
// objects in every view, the live stream included; a cluster-wide reader
// sees the counts the API server holds; the "why" line follows a chain;
// "reconcile now" needs patch; bad input gets a clear 4xx.
func TestStatusPage(t *testing.T) {
	ctx := context.Background()
	mine, other := cp.Namespace(t), cp.Namespace(t)
	gitSource(t, mine, "apps", map[string]string{"deploy/a.yaml": configMap("a", mine)})
	gitSource(t, other, "apps", map[string]string{"deploy/a.yaml": configMap("a", other)})
	broken := kustomization(mine, "broken", "apps", "./missing")
	waits := kustomization(mine, "waits", "apps", "./deploy")
	waits.Spec.DependsOn = []meta.DependencyReference{{Name: "broken"}}
	theirs := kustomization(other, "apps", "apps", "./deploy")
	for _, o := range []client.Object{kustomization(mine, "apps", "apps", "./deploy"), broken, waits, theirs} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	viewer := cp.ServiceAccountToken(t, mine, "viewer", false, fluxRead)
	admin := cp.ServiceAccountToken(t, mine, "admin", true, rbacv1.PolicyRule{APIGroups: fluxRead.APIGroups, Resources: []string{"*"}, Verbs: []string{"get"}})
	e := startEngine(t, engine.Options{StatusPage: engine.StatusPageOptions{Addr: "0.0.0.0:0", Prefix: "/cozy"}})
	var base string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		base = e.StatusPageURL()
		return base != "", nil
	}); err != nil {
		t.Fatal("the status page never listened")
	}
	// Listening on every address: reach it on loopback, as off it.
	base = strings.Replace(strings.TrimSuffix(base, "/"), "0.0.0.0", "127.0.0.1", 1)
	base = strings.Replace(base, "[::]", "127.0.0.1", 1)
	anon := pageClient{t, base, ""}
	as := pageClient{t, base, viewer}
	root := pageClient{t, base, admin}

	// No token: 401, the API and the page alike; a bad token too.
	for _, p := range []string{"/api/v1/overview", "/", "/api/v1/objects", "/api/v1/watch", "/overview.txt"} {
		if code, b := anon.do(http.MethodGet, p, nil); code != http.StatusUnauthorized {
			t.Fatalf("GET %s without a token: %d %s", p, code, b)
		}
	}
	if code, _ := (pageClient{t, base, "not-a-token"}).do(http.MethodGet, "/api/v1/overview", nil); code != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d, want 401", code)
	}
	if code, _ := anon.do(http.MethodGet, "/assets/app.js", nil); code != http.StatusOK {
		t.Fatalf("the page's script: %d", code)
	}

	// The cluster-wide reader sees what the API server holds.
	waitFor(t, broken, func() bool { return conditions.IsFalse(broken, meta.ReadyCondition) }, "broken fails")
	var ov statuspage.Overview
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		units, err := status.ListUnits(ctx, cp.Client)
		if err != nil {
			return false, err
		}
		root.get("/api/v1/overview", &ov)
		want := status.CountUnits(units)
		for i, k := range ov.Kinds {
			if k.Total != want[i].Total || k.Ready != want[i].Ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the overview's counts never matched the API server's: %+v", ov.Kinds)
	}

	// The one-namespace viewer: only its namespace, in every view.
	var list statuspage.List
	as.get("/api/v1/objects?limit=500", &list)
	if list.Total != 4 {
		t.Fatalf("the viewer lists %d objects, want its 4: %+v", list.Total, list.Items)
	}
	for _, o := range list.Items {
		if o.Namespace != mine {
			t.Fatalf("the viewer sees %s", o.Ref)
		}
	}
	as.get("/api/v1/overview", &ov)
	total := 0
	for _, k := range ov.Kinds {
		total += k.Total
	}
	if total != 4 || ov.User != "system:serviceaccount:"+mine+":viewer" {
		t.Fatalf("the viewer's overview counts %d objects as %q, want 4", total, ov.User)
	}
	var tl struct{ Entries []statuspage.TimelineEntry }
	as.get("/api/v1/timeline", &tl)
	if len(tl.Entries) == 0 {
		t.Fatal("no timeline")
	}
	for _, e := range tl.Entries {
		if e.Namespace != mine {
			t.Fatalf("the viewer's timeline shows %s", e.Ref)
		}
	}
	if code, _ := as.do(http.MethodGet, "/api/v1/objects/Kustomization/"+other+"/apps", nil); code != http.StatusNotFound {
		t.Fatalf("another namespace's object: %d, want 404", code)
	}
	if code, b := as.do(http.MethodGet, "/overview.txt", nil); code != http.StatusOK || strings.Contains(string(b), other) || !strings.Contains(string(b), "Kustomization") {
		t.Fatalf("the text overview: %d\n%s", code, b)
	}

	// Why "waits" waits: on "broken", which failed.
	var d statuspage.Detail
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		as.get("/api/v1/objects/Kustomization/"+mine+"/waits", &d)
		return len(d.Why) == 2 && d.Why[1].Name == "broken" && d.Why[1].State == statuspage.StateFailed, nil
	}); err != nil {
		t.Fatalf("why: %+v", d.Why)
	}
	if len(d.Conditions) == 0 || len(d.DependsOn) != 2 {
		t.Fatalf("detail: conditions %+v, dependsOn %+v", d.Conditions, d.DependsOn)
	}

	// The inventory with each object's health.
	var apps statuspage.Detail
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		as.get("/api/v1/objects/Kustomization/"+mine+"/apps", &apps)
		return len(apps.Inventory) == 1, nil
	}); err != nil {
		t.Fatalf("inventory: %+v", apps.Inventory)
	}
	if inv := apps.Inventory[0]; inv.ID != mine+"_a__ConfigMap" || inv.Status != "Current" {
		t.Fatalf("inventory: %+v", apps.Inventory)
	}

	// Live: a change in the viewer's namespace arrives, one in another
	// does not.
	events := pageStream(t, base, viewer)
	suspend(t, theirs)
	suspendKs := kustomization(mine, "apps", "apps", "./deploy")
	suspend(t, suspendKs)
	deadline := time.After(20 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-events:
			if strings.Contains(ev, other) {
				t.Fatalf("the viewer's stream shows another namespace: %s", ev)
			}
			seen = strings.Contains(ev, `"name":"apps"`) && strings.Contains(ev, `"state":"suspended"`)
		case <-deadline:
			t.Fatal("the change never reached the stream")
		}
	}

	// Reconcile now: needs the action header and patch rights.
	hdr := map[string]string{"X-Cozy-Aio-Action": "reconcile"}
	if code, _ := as.do(http.MethodPost, "/api/v1/objects/Kustomization/"+mine+"/waits/reconcile", nil); code != http.StatusForbidden {
		t.Fatalf("an action without its header: %d, want 403", code)
	}
	if code, b := as.do(http.MethodPost, "/api/v1/objects/Kustomization/"+mine+"/waits/reconcile", hdr); code != http.StatusOK {
		t.Fatalf("reconcile now: %d %s", code, b)
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(waits), waits); err != nil || waits.Annotations[meta.ReconcileRequestAnnotation] == "" {
		t.Fatalf("no requestedAt after reconcile now: %v %v", err, waits.Annotations)
	}
	if code, _ := root.do(http.MethodPost, "/api/v1/objects/Kustomization/"+mine+"/waits/reconcile", hdr); code != http.StatusForbidden {
		t.Fatalf("reconcile now by a user who may only get: %d, want 403", code)
	}
	if code, _ := as.do(http.MethodPost, "/api/v1/objects/Kustomization/"+other+"/apps/reconcile", hdr); code != http.StatusNotFound {
		t.Fatalf("reconcile now in another namespace: %d, want 404", code)
	}

	// Bad input: a clear 4xx.
	for p, want := range map[string]int{
		"/api/v1/objects?limit=abc":                     http.StatusBadRequest,
		"/api/v1/objects?limit=100000":                  http.StatusBadRequest,
		"/api/v1/objects?kind=Nope":                     http.StatusBadRequest,
		"/api/v1/objects?state=sleepy":                  http.StatusBadRequest,
		"/api/v1/objects?continue=-1":                   http.StatusBadRequest,
		"/api/v1/objects/Nope/a/b":                      http.StatusBadRequest,
		"/api/v1/objects/Kustomization/" + mine + "/no": http.StatusNotFound,
		"/api/v1/objects/Kustomization/only-two":        http.StatusNotFound,
		"/api/v1/timeline?since=yesterday":              http.StatusBadRequest,
		"/api/v1/overview?format=xml":                   http.StatusBadRequest,
		"/api/v1/nothing":                               http.StatusNotFound,
		"/assets/../../etc/passwd":                      http.StatusNotFound,
		"/assets/nope.js":                               http.StatusNotFound,
	} {
		if code, b := as.do(http.MethodGet, p, nil); code != want {
			t.Errorf("GET %s: %d %s, want %d", p, code, b, want)
		}
	}
	outside := strings.TrimSuffix(base, "/cozy")
	if code, _ := (pageClient{t, outside, viewer}).do(http.MethodGet, "/api/v1/overview", nil); code != http.StatusNotFound {
		t.Errorf("outside the prefix: %d, want 404", code)
	}
}

func suspend(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`))); err != nil {
		t.Fatal(err)
	}
}

// pageStream signs in with token (the session cookie, as a browser does) and
// streams the page's server-sent events.
func pageStream(t *testing.T, base, token string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		cookie = c
	}
	if resp.StatusCode != http.StatusOK || cookie == nil || !cookie.HttpOnly || len(cookie.Value) > 64 {
		t.Fatalf("signing in: %d, cookie %+v", resp.StatusCode, cookie)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/watch", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", err, resp)
	}
	out := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				select {
				case out <- line:
				default:
				}
			}
		}
	}()
	return out
}

package helmrepo_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
)

var errRefused = errors.New("refused by the test's dial hook")

// policyDial is the engine's hook with the default policy, which lets
// sources reach loopback and refuses link-local addresses.
var policyDial = egress.Policy{}.Dialer(egress.Source, nil).DialContext

// chartRepo starts a repository holding the chart demo 1.0.0 and returns
// it with the chart's index entry.
func chartRepo(t *testing.T) (*testenv.HelmRepo, *repo.ChartVersion) {
	t.Helper()
	r, err := testenv.StartHelmRepo(testenv.HelmRepoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if _, err := r.AddChart(map[string]string{"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.0.0\n"}, ""); err != nil {
		t.Fatal(err)
	}
	b, err := r.File("index.yaml")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := helmrepo.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := helmrepo.Select(idx, "demo", "")
	if err != nil {
		t.Fatal(err)
	}
	return r, cv
}

// TestDialHook checks that indexes and charts are downloaded through
// Options.Dial only.
func TestDialHook(t *testing.T) {
	ctx := context.Background()
	r, cv := chartRepo(t)
	store, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "HelmRepository", Namespace: "ns", Name: "charts"}
	c := helmrepo.NewClient(helmrepo.ClientOptions{})

	refused := helmrepo.Options{Dial: func(context.Context, string, string) (net.Conn, error) { return nil, errRefused }}
	if _, err := c.FetchIndex(ctx, store, obj, r.URL(), "", refused); !errors.Is(err, errRefused) {
		t.Errorf("FetchIndex: got %v, want the hook's error", err)
	}
	if _, err := c.DownloadChart(ctx, r.URL(), cv, refused); !errors.Is(err, errRefused) {
		t.Errorf("DownloadChart: got %v, want the hook's error", err)
	}
	for _, p := range []string{"/index.yaml", "/demo-1.0.0.tgz"} {
		if n, _ := r.Requests(p); n != 0 {
			t.Fatalf("the server saw %d requests for %s", n, p)
		}
	}

	allowed := helmrepo.Options{Dial: policyDial}
	if _, err := c.FetchIndex(ctx, store, obj, r.URL(), "", allowed); err != nil {
		t.Fatalf("FetchIndex with the policy's dialer: %v", err)
	}
	if _, err := c.DownloadChart(ctx, r.URL(), cv, allowed); err != nil {
		t.Fatalf("DownloadChart with the policy's dialer: %v", err)
	}
}

// TestRedirectToMetadataIsRefused follows a loopback repository's
// redirect to the cloud metadata address: the policy's dialer refuses it
// before connecting.
func TestRedirectToMetadataIsRefused(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "http://169.254.169.254/latest/meta-data"+req.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	store, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "HelmRepository", Namespace: "ns", Name: "charts"}
	c := helmrepo.NewClient(helmrepo.ClientOptions{})
	opts := helmrepo.Options{Dial: policyDial}
	cv := &repo.ChartVersion{Metadata: &chartv2.Metadata{Name: "demo", Version: "1.0.0"}, URLs: []string{"demo-1.0.0.tgz"}}

	_, indexErr := c.FetchIndex(ctx, store, obj, srv.URL, "", opts)
	_, chartErr := c.DownloadChart(ctx, srv.URL, cv, opts)
	metadata := netip.MustParseAddr("169.254.169.254")
	for name, err := range map[string]error{"FetchIndex": indexErr, "DownloadChart": chartErr} {
		var re *egress.RefusedError
		if !errors.As(err, &re) || re.Addr != metadata || re.Class != egress.Source {
			t.Errorf("%s: got %v, want the policy's refusal of %s", name, err, metadata)
		}
	}
}

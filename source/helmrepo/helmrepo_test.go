package helmrepo_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
)

func index(versions ...string) *repo.IndexFile {
	idx := repo.NewIndexFile()
	for _, v := range versions {
		idx.MustAdd(&chartv2.Metadata{APIVersion: "v2", Name: "demo", Version: v}, "demo-"+v+".tgz", "", "")
	}
	idx.SortEntries()
	return idx
}

func TestSelect(t *testing.T) {
	idx := index("1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "0.9.0")
	for _, tc := range []struct {
		rng, want, err string
	}{
		{"", "1.10.0", ""},
		{"*", "1.10.0", ""},
		{"1.x", "1.10.0", ""},
		{"~1.2", "1.2.0", ""},
		{">=2.0.0-0", "2.0.0-rc.1", ""},
		{"1.0.0", "1.0.0", ""},
		{">=3", "", `chart "demo": no version matches ">=3" (newest available: 2.0.0-rc.1, 1.10.0, 1.2.0, 1.0.0, 0.9.0)`},
		{"][", "", "is not a semver range"},
	} {
		cv, err := helmrepo.Select(idx, "demo", tc.rng)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Select(%q) = %v, want error containing %q", tc.rng, err, tc.err)
			}
		case err != nil || cv.Version != tc.want:
			t.Errorf("Select(%q) = %v, %v; want %s", tc.rng, cv, err, tc.want)
		}
	}
	if _, err := helmrepo.Select(idx, "absent", ""); !errors.Is(err, helmrepo.ErrChartNotFound) {
		t.Errorf("absent chart: %v", err)
	}
}

func TestSelectBuildMetadataByCreation(t *testing.T) {
	idx := index("1.0.0+a", "1.0.0+b")
	idx.Entries["demo"][0].Created = time.Unix(200, 0)
	idx.Entries["demo"][1].Created = time.Unix(100, 0)
	cv, err := helmrepo.Select(idx, "demo", "1.x")
	if err != nil || cv.Created != time.Unix(200, 0) {
		t.Fatalf("got %v %v, want the one created last", cv, err)
	}
}

func TestParseIndex(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
	}{
		{"yaml", "apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n    urls: [demo-1.0.0.tgz]\n", ""},
		{"json", `{"apiVersion":"v1","entries":{"demo":[{"name":"demo","version":"1.0.0","urls":["x.tgz"]}]}}`, ""},
		{"empty", "  \n", "empty index.yaml"},
		{"no api version", "entries: {}\n", "no API version"},
		{"not yaml", "<html>\n\tkey: [", "invalid Helm repository index"},
		{"unknown field", "apiVersion: v1\nentries: {}\nsurprise: 1\n", "unknown field"},
	} {
		idx, err := helmrepo.ParseIndex([]byte(tc.in))
		if tc.err == "" {
			if err != nil || len(idx.Entries["demo"]) != 1 {
				t.Errorf("%s: %v %v", tc.name, idx, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, helmrepo.ErrInvalidIndex) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	// Invalid entries are dropped, as Helm does.
	idx, err := helmrepo.ParseIndex([]byte("apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n  - name: demo\n  -\n"))
	if err != nil || len(idx.Entries["demo"]) != 1 {
		t.Fatalf("invalid entries should be dropped: %v %v", idx, err)
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nentries:\n  demo:\n  - name: demo\n    version: 1.0.0\n"))
	f.Add([]byte(`{"apiVersion":"v1","entries":{"a":[null,{"name":"a","version":"x"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := helmrepo.ParseIndex(b)
		if err != nil {
			return
		}
		for name := range idx.Entries {
			_, _ = helmrepo.Select(idx, name, ">=0.0.0-0")
		}
	})
}

// TestFetchIndexAndCharts runs the client against a repository written
// by Helm: conditional fetches, one download per chart for concurrent
// callers, credentials for the repository's host only.
func TestFetchIndexAndCharts(t *testing.T) {
	ctx := context.Background()
	r, err := testenv.StartHelmRepo(testenv.HelmRepoOptions{Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.AddChart(map[string]string{"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.0.0\n"}, ""); err != nil {
		t.Fatal(err)
	}
	// Let the index age past the one-second resolution of HTTP dates.
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(filepath.Join(indexDir(t, r), "index.yaml"), old, old); err != nil {
		t.Fatal(err)
	}
	store, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := helmrepo.NewClient(helmrepo.ClientOptions{})
	obj := source.Object{Kind: "HelmRepository", Namespace: "ns", Name: "charts"}
	opts := helmrepo.Options{Username: "u", Password: "p"}
	first, err := c.FetchIndex(ctx, store, obj, r.URL(), "", opts)
	if err != nil || first.Unchanged || !strings.HasSuffix(first.Artifact.Path, ".yaml") || first.Artifact.Revision != first.Digest {
		t.Fatalf("first fetch: %+v %v", first, err)
	}
	again, err := c.FetchIndex(ctx, store, obj, r.URL(), first.Digest, opts)
	if err != nil || !again.Unchanged || again.Downloaded {
		t.Fatalf("second fetch should be a 304: %+v %v", again, err)
	}
	if _, err := c.FetchIndex(ctx, store, obj, r.URL(), "", helmrepo.Options{}); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("anonymous fetch: %v, want ErrAuth", err)
	}
	idx, err := c.Index(store, first.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := helmrepo.Select(idx, "demo", "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			b, err := c.DownloadChart(ctx, r.URL(), cv, opts)
			if err == nil {
				_, err = helmrepo.VerifyChart(b, "demo", "1.0.0")
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := r.Downloads("/demo-1.0.0.tgz"); n != 1 {
		t.Fatalf("20 callers downloaded the chart %d times, want once", n)
	}
	// Without the credentials the cached archive is not handed out.
	if _, err := c.DownloadChart(ctx, r.URL(), cv, helmrepo.Options{}); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("download without credentials: %v, want ErrAuth", err)
	}
}

func indexDir(t *testing.T, r *testenv.HelmRepo) string {
	t.Helper()
	return r.Dir()
}

func TestDownloadChartCredentialsStayOnTheRepositoryHost(t *testing.T) {
	var authed atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, _, ok := req.BasicAuth(); ok {
			authed.Add(1)
		}
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer other.Close()
	cv := &repo.ChartVersion{Metadata: &chartv2.Metadata{Name: "demo", Version: "1.0.0"}, URLs: []string{other.URL + "/demo-1.0.0.tgz"}}
	c := helmrepo.NewClient(helmrepo.ClientOptions{})
	_, err := c.DownloadChart(context.Background(), "https://charts.example.com", cv, helmrepo.Options{Username: "u", Password: "p"})
	if !errors.Is(err, source.ErrAuth) || !strings.Contains(err.Error(), "passCredentials") || authed.Load() != 0 {
		t.Fatalf("err %v, credentials sent %d times", err, authed.Load())
	}
	_, _ = c.DownloadChart(context.Background(), "https://charts.example.com", cv, helmrepo.Options{Username: "u", Password: "p", PassCredentials: true})
	if authed.Load() != 1 {
		t.Fatalf("with passCredentials the credentials go along; sent %d times", authed.Load())
	}
}

// TestDownloadsOverTheirLimit refuses an index or a chart larger than its
// option: from the Content-Length when the server sends one, else once
// more than the limit has been read.
func TestDownloadsOverTheirLimit(t *testing.T) {
	ctx := context.Background()
	r, cv := chartRepo(t)
	store, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "HelmRepository", Namespace: "ns", Name: "charts"}
	c := helmrepo.NewClient(helmrepo.ClientOptions{})
	index, _ := r.File("index.yaml")
	chart, _ := r.File("demo-1.0.0.tgz")
	size := func(n int) string { return strconv.Itoa(n) }

	check := func(name string, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, source.ErrTooLarge) {
			t.Errorf("%s: got %v, want ErrTooLarge", name, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", name, err, w)
			}
		}
	}
	_, err := c.FetchIndex(ctx, store, obj, r.URL(), "", helmrepo.Options{MaxIndexSize: int64(len(index) - 1)})
	check("index", err, r.URL()+"/index.yaml", size(len(index)), size(len(index)-1), "MaxIndexSize")
	_, err = c.DownloadChart(ctx, r.URL(), cv, helmrepo.Options{MaxChartSize: int64(len(chart) - 1)})
	check("chart", err, r.URL()+"/demo-1.0.0.tgz", size(len(chart)), size(len(chart)-1), "MaxChartSize")
	if _, err := c.DownloadChart(ctx, r.URL(), cv, helmrepo.Options{MaxChartSize: int64(len(chart))}); err != nil {
		t.Fatalf("a chart of exactly MaxChartSize: %v", err)
	}

	// A body larger than the server's buffer goes out chunked, without a
	// Content-Length.
	r.Serve("/index.yaml", append([]byte("apiVersion: v1\nentries: {}\n"), bytes.Repeat([]byte("# padding\n"), 10<<10)...))
	_, err = c.FetchIndex(ctx, store, obj, r.URL(), "", helmrepo.Options{MaxIndexSize: 64 << 10})
	check("streamed index", err, r.URL()+"/index.yaml", "is more than the limit of "+size(64<<10), "MaxIndexSize")
}

package helmrepo_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/getter"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/helmrepo"
)

// benchIndex writes, with Helm's repo package, an index of 5,000 versions
// of 50 charts (100 versions each) with digests and descriptions, as a
// busy public repository has.
func benchIndex(b *testing.B) (dir string, size int) {
	b.Helper()
	dir = b.TempDir()
	idx := repo.NewIndexFile()
	for c := range 50 {
		for v := range 100 {
			md := &chartv2.Metadata{
				APIVersion: "v2", Name: fmt.Sprintf("chart-%02d", c), Version: fmt.Sprintf("%d.%d.%d", v/20, v%20, c%3),
				AppVersion: fmt.Sprintf("v%d.%d", v, c), Description: "A Helm chart for Kubernetes with a description of usual length",
				Home: "https://example.com/charts", Keywords: []string{"example", "benchmark"},
				Maintainers: []*chartv2.Maintainer{{Name: "cozy", Email: "cozy@example.com"}},
			}
			idx.MustAdd(md, fmt.Sprintf("%s-%s.tgz", md.Name, md.Version), "", fmt.Sprintf("%064x", c*1000+v))
		}
	}
	idx.Generated = time.Unix(0, 0)
	p := filepath.Join(dir, "index.yaml")
	if err := idx.WriteFile(p, 0o644); err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	return dir, int(fi.Size())
}

// BenchmarkIndex5000 fetches, parses and selects from an index of 5,000
// chart versions over loopback HTTP: cozy-aio's client, and Helm's own
// repo loading (DownloadIndexFile, then LoadIndexFile and Get, as
// `helm repo update` and `helm install` do) in the same run.
func BenchmarkIndex5000(b *testing.B) {
	dir, size := benchIndex(b)
	files := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer files.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "index.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	// A server that sends no validators: an unchanged index is downloaded
	// and compared by digest.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(raw) }))
	defer plain.Close()
	ctx := context.Background()
	obj := source.Object{Kind: "HelmRepository", Namespace: "bench", Name: "charts"}
	const chart, rng = "chart-25", ">=2.0.0 <4.0.0"
	b.Logf("index.yaml: %d bytes, 5000 versions", size)

	b.Run("cozy/fetch-parse-select", func(b *testing.B) {
		store, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
		c := helmrepo.NewClient(helmrepo.ClientOptions{})
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.FetchIndex(ctx, store, obj, files.URL, "", helmrepo.Options{})
			if err != nil {
				b.Fatal(err)
			}
			idx, err := c.Index(store, res.Artifact)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := helmrepo.Select(idx, chart, rng); err != nil {
				b.Fatal(err)
			}
		}
	})
	unchanged := func(b *testing.B, url string) {
		store, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
		c := helmrepo.NewClient(helmrepo.ClientOptions{})
		first, err := c.FetchIndex(ctx, store, obj, url, "", helmrepo.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.FetchIndex(ctx, store, obj, url, first.Digest, helmrepo.Options{})
			if err != nil || !res.Unchanged {
				b.Fatal(res, err)
			}
		}
	}
	b.Run("cozy/unchanged-304", func(b *testing.B) { unchanged(b, files.URL) })
	b.Run("cozy/unchanged-digest", func(b *testing.B) { unchanged(b, plain.URL) })
	b.Run("cozy/select-cached", func(b *testing.B) {
		store, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
		c := helmrepo.NewClient(helmrepo.ClientOptions{})
		res, err := c.FetchIndex(ctx, store, obj, files.URL, "", helmrepo.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			idx, err := c.Index(store, res.Artifact)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := helmrepo.Select(idx, chart, rng); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helm/download-load-get", func(b *testing.B) {
		r, err := repo.NewChartRepository(&repo.Entry{Name: "bench", URL: files.URL}, getter.Getters())
		if err != nil {
			b.Fatal(err)
		}
		r.CachePath = b.TempDir()
		b.ReportAllocs()
		for b.Loop() {
			p, err := r.DownloadIndexFile()
			if err != nil {
				b.Fatal(err)
			}
			idx, err := repo.LoadIndexFile(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := idx.Get(chart, rng); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helm/load-get", func(b *testing.B) {
		p := filepath.Join(dir, "index.yaml")
		b.ReportAllocs()
		for b.Loop() {
			idx, err := repo.LoadIndexFile(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := idx.Get(chart, rng); err != nil {
				b.Fatal(err)
			}
		}
	})
}

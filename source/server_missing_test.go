package source_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cozystack/cozy-aio/source"
)

// A file the store lacks is asked of ServerOptions.Missing: served if that
// stores it, a 503 with Retry-After if Missing says it should be held but
// it is not yet, a 404 otherwise; a request with NoFetchHeader never asks.
func TestServerAsksForMissingArtifacts(t *testing.T) {
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := source.Object{Kind: "OCIRepository", Namespace: "apps", Name: "web"}
	var asked atomic.Int32
	var art source.Artifact
	srv := startServer(t, st, source.ServerOptions{Addr: "127.0.0.1:0", Missing: func(ctx context.Context, p string) bool {
		asked.Add(1)
		if p == "ocirepository/apps/web/coming.tar.gz" {
			return true
		}
		if p != "ocirepository/apps/web/"+strings.TrimPrefix(art.Digest, "sha256:")+".tar.gz" {
			return false
		}
		_, err := st.Put(ctx, obj, "v1", strings.NewReader("content"))
		return err == nil
	}})
	// The artifact's name, from a store that held it.
	other, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	if art, err = other.Put(context.Background(), obj, "v1", strings.NewReader("content")); err != nil {
		t.Fatal(err)
	}
	get := func(path string, noFetch bool) (int, string, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/"+path, nil)
		if noFetch {
			req.Header.Set(source.NoFetchHeader, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if code, _, _ := get(art.Path, true); code != http.StatusNotFound || asked.Load() != 0 {
		t.Fatalf("with %s: %d, asked %d times", source.NoFetchHeader, code, asked.Load())
	}
	if code, body, _ := get("ocirepository/apps/web/other.tar.gz", false); code != http.StatusNotFound || asked.Load() != 1 {
		t.Fatalf("an artifact nothing names: %d %q, asked %d times", code, body, asked.Load())
	}
	if code, body, h := get("ocirepository/apps/web/coming.tar.gz", false); code != http.StatusServiceUnavailable || h.Get("Retry-After") != "5" || asked.Load() != 2 {
		t.Fatalf("an artifact not stored yet: %d %q, Retry-After %q, asked %d times", code, body, h.Get("Retry-After"), asked.Load())
	}
	if code, body, _ := get(art.Path, false); code != http.StatusOK || body != "content" || asked.Load() != 3 {
		t.Fatalf("an artifact Missing stores: %d %q, asked %d times", code, body, asked.Load())
	}
	if code, _, _ := get(art.Path, false); code != http.StatusOK || asked.Load() != 3 {
		t.Fatalf("once stored: %d, asked %d times", code, asked.Load())
	}
}

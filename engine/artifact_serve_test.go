package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
)

// artifactGet GETs u, with source.NoFetchHeader when noFetch is set.
func artifactGet(t *testing.T, u string, noFetch bool) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if noFetch {
		req.Header.Set(source.NoFetchHeader, "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// countingProxy serves target (host:port) through a proxy that counts the
// requests it passes on: the upstream's load.
func countingProxy(t *testing.T, target string) (host string, requests *atomic.Int64) {
	requests = new(atomic.Int64)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), requests
}

// The artifact server of a single engine (the leader: its reconcilers
// store each artifact before its status names it) asked for an artifact
// its store lost fetches nothing: the request gets a 503 with Retry-After,
// and upstream sees no request. The source's own reconciler stores it
// again, after which it is served. Replicas asking each other
// (source.NoFetchHeader) get only what is held.
func TestArtifactServerServesWhatStatusNamesAndTheStoreLacks(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.PushArtifact(ctx, "manifests/app", "v1", map[string]string{"cm.yaml": configMap("cm", ns)}, nil); err != nil {
		t.Fatal(err)
	}
	upstream, pulls := countingProxy(t, reg.Host())
	data := t.TempDir()
	startEngine(t, engine.Options{DataDir: data})
	src := manifestSource(ns, "app", "oci://"+upstream+"/manifests/app", "v1")
	if err := cp.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, src, func() bool { return conditions.IsReady(src) && src.Status.Artifact != nil }, "an artifact")
	art := src.Status.Artifact
	if err := os.Remove(filepath.Join(data, filepath.FromSlash(art.Path))); err != nil {
		t.Fatal(err)
	}
	before := pulls.Load()
	if code, _, _ := artifactGet(t, art.URL, true); code != http.StatusNotFound {
		t.Fatalf("with %s, an artifact the store lacks: %d, want 404", source.NoFetchHeader, code)
	}
	// The engine's cache sees the status a moment after the API server
	// does: until then no status names the path (404).
	eventually(t, 10*time.Second, "the engine's cache names the artifact", func() bool {
		code, _, _ := artifactGet(t, art.URL, false)
		return code != http.StatusNotFound
	})
	for range 20 {
		if code, h, _ := artifactGet(t, art.URL, false); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Fatalf("an artifact the store lacks: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
		}
	}
	if n := pulls.Load() - before; n != 0 {
		t.Fatalf("requests for an artifact the store lacks made %d requests upstream, want 0", n)
	}

	requestReconcile(t, src)
	eventually(t, 30*time.Second, "the reconciler storing the artifact again", func() bool {
		code, _, body := artifactGet(t, art.URL, false)
		return code == http.StatusOK && digestOf(body) == art.Digest
	})
	if code, _, _ := artifactGet(t, art.URL, true); code != http.StatusOK {
		t.Fatalf("once stored again, the store holds it: %d", code)
	}
}

// A standby behind the replicas' shared address (--artifact-base-url)
// mirrors the artifact a status names on its own, once, from that
// address; a thousand requests for it while it is missing fetch nothing
// more. Each either waits for the mirror and gets the artifact, or gets a
// 503 with Retry-After once its bounded wait ends. Once the source is
// deleted, the mirror removes its artifacts.
func TestArtifactRequestsWaitForTheMirror(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	content, err := testenv.TarGz(map[string]string{"cm.yaml": configMap("cm", ns)}, "")
	if err != nil {
		t.Fatal(err)
	}
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}}
	staged, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	built, err := staged.Put(ctx, source.Object{Kind: sourcev1.ExternalArtifactKind, Namespace: ns, Name: "app"}, "v1", strings.NewReader(string(content)))
	if err != nil {
		t.Fatal(err)
	}
	// The shared address: here, the replica that holds the artifact. It
	// answers once the test lets it.
	var fetches atomic.Int64
	gate := make(chan struct{})
	shared := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if r.URL.Path != "/"+built.Path || r.Header.Get(source.NoFetchHeader) == "" {
			http.NotFound(w, r)
			return
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(content)
	}))
	defer shared.Close()
	holdLeaderLease(t, ns)
	e := startEngine(t, engine.Options{
		HolderID: "standby", ArtifactBaseURL: shared.URL,
		Replicas: engine.ReplicaOptions{Enabled: true, Namespace: ns, RetryPeriod: 500 * time.Millisecond},
	})

	if err := cp.Client.Create(ctx, ea); err != nil {
		t.Fatal(err)
	}
	size := built.Size
	ea.Status.Artifact = &meta.Artifact{Path: built.Path, URL: shared.URL + "/" + built.Path, Revision: "v1",
		Digest: built.Digest, Size: &size, LastUpdateTime: metav1.Now()}
	if err := cp.Client.Status().Update(ctx, ea); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the standby's mirror fetching from the shared address", func() bool { return fetches.Load() == 1 })
	if e.Replica().Leader {
		t.Fatal("the engine leads; the test wants a standby")
	}
	own := "http://" + e.ArtifactAddr() + "/" + built.Path
	if code, h, _ := artifactGet(t, own, false); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("while the mirror's fetch hangs: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
	}

	codes := getMany(t, own, 1000, func() { close(gate) })
	if codes[http.StatusOK] == 0 || codes[http.StatusOK]+codes[http.StatusServiceUnavailable] != 1000 {
		t.Fatalf("1000 requests: %v, want 200s, and 503s with Retry-After for the rest", codes)
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("the shared address was asked %d times, want once (the mirror)", n)
	}
	t.Logf("1000 requests: %v", codes)
	code, _, body := artifactGet(t, own, true)
	if code != http.StatusOK || digestOf(body) != built.Digest {
		t.Fatalf("after the mirror: %d, digest %s, want 200 with %s", code, digestOf(body), built.Digest)
	}

	// The leader removes a deleted source's artifacts from its store; the
	// mirror does so on the standby.
	if err := cp.Client.Delete(ctx, ea); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the mirror removing the deleted source's artifact", func() bool {
		return !e.Store().Exists(built)
	})
}

// getMany sends n concurrent GETs for u, calls release once they are all
// waiting, and counts their answers by status; a 503 without Retry-After
// counts as 0.
func getMany(t *testing.T, u string, n int, release func()) map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var sent, done sync.WaitGroup
	sent.Add(n)
	for range n {
		done.Go(func() {
			sent.Done()
			code, h, _ := artifactGet(t, u, false)
			if code == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
				code = 0
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	sent.Wait()
	time.Sleep(500 * time.Millisecond)
	release()
	done.Wait()
	return codes
}

// holdLeaderLease makes another holder the leader in ns for the test's
// length, so that the engines started there are standbys.
func holdLeaderLease(t *testing.T, ns string) {
	t.Helper()
	holder, secs, now := "elsewhere", int32(3600), metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "cozy-aio-leader", Namespace: ns, Labels: map[string]string{engine.LabelLeaseRole: "leader"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	if err := cp.Client.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
}

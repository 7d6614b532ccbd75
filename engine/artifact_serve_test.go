package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/cozystack/cozy-aio/engine"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
)

// The artifact server answers for an artifact a status names that its
// store lacks (a replica behind the address another replica advertised,
// or an emptied data directory): rebuilt from upstream, checked against
// status.artifact.digest, then served. Replicas asking each other
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
	data := t.TempDir()
	startEngine(t, engine.Options{DataDir: data})
	src := manifestSource(ns, "app", "oci://"+reg.Host()+"/manifests/app", "v1")
	if err := cp.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, src, func() bool { return conditions.IsReady(src) && src.Status.Artifact != nil }, "an artifact")
	art := src.Status.Artifact
	get := func(noFetch bool) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, art.URL, nil)
		if noFetch {
			req.Header.Set(source.NoFetchHeader, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if err := os.Remove(filepath.Join(data, filepath.FromSlash(art.Path))); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(true); code != http.StatusNotFound {
		t.Fatalf("with %s, an artifact the store lacks: %d, want 404", source.NoFetchHeader, code)
	}
	code, body := get(false)
	sum := sha256.Sum256(body)
	if code != http.StatusOK || "sha256:"+hex.EncodeToString(sum[:]) != art.Digest {
		t.Fatalf("an artifact the store lacks: %d, %d bytes of digest %x, want status's %s", code, len(body), sum, art.Digest)
	}
	if code, _ := get(true); code != http.StatusOK {
		t.Fatalf("once rebuilt, the store holds it: %d", code)
	}
}

package oci_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/oci"
)

var errRefused = errors.New("refused by the test's dial hook")

// TestFetchDialHook checks that the registry is reached through
// Registry.Dial only.
func TestFetchDialHook(t *testing.T) {
	f := setup(t)
	host, conns, _ := countingProxy(t, f.reg)
	ctx := context.Background()
	refused := f.opts
	refused.DockerConfigJSON = []byte(`{"auths":{"` + host + `":{"username":"flux","password":"s3cret"}}}`)
	refused.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errRefused }
	repoURL := "oci://" + host + "/manifests"
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	if _, err := oci.Fetch(ctx, st, obj, repoURL, refused); !errors.Is(err, errRefused) {
		t.Errorf("Fetch: got %v, want the hook's error", err)
	}
	if _, err := oci.FetchRevision(ctx, st, obj, repoURL, f.v100.Digest.String(), refused); !errors.Is(err, errRefused) {
		t.Errorf("FetchRevision: got %v, want the hook's error", err)
	}
	if err := oci.Ping(ctx, "oci://"+host, refused); !errors.Is(err, errRefused) {
		t.Errorf("Ping: got %v, want the hook's error", err)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the registry accepted %d connections", n)
	}

	allowed := f.opts
	allowed.Dial = egress.Policy{}.Dialer(egress.Source, nil).DialContext
	allowed.Ref = oci.Ref{Tag: "v1.0.0"}
	res, err := oci.Fetch(ctx, st, obj, f.url, allowed)
	if err != nil || res.Revision.String != "v1.0.0@"+f.v100.Digest.String() {
		t.Fatalf("the policy's dialer to the loopback registry: %+v %v", res, err)
	}
}

package testenv_test

import (
	"bytes"
	"testing"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

func TestRegistryPushAndPull(t *testing.T) {
	ctx := testContext(t)
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{Username: "bob", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	files := map[string]string{"deploy/cm.yaml": "kind: ConfigMap\n"}
	pushed, err := reg.PushArtifact(ctx, "apps/podinfo", "v1", files, nil)
	if err != nil {
		t.Fatalf("push: %v", err)
	}

	repo, err := reg.Repository("apps/podinfo")
	if err != nil {
		t.Fatal(err)
	}
	dst := memory.New()
	pulled, err := oras.Copy(ctx, repo, "v1", dst, "v1", oras.DefaultCopyOptions)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if pulled.Digest != pushed.Digest {
		t.Fatalf("pulled digest %s, pushed %s", pulled.Digest, pushed.Digest)
	}
	layers, err := content.Successors(ctx, dst, pulled)
	if err != nil {
		t.Fatal(err)
	}
	want, err := testenv.TarGz(files, "")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, l := range layers {
		if l.MediaType != testenv.FluxContentMediaType {
			continue
		}
		got, err := content.FetchAll(ctx, dst, l)
		if err != nil {
			t.Fatal(err)
		}
		found = bytes.Equal(got, want)
	}
	if !found {
		t.Fatalf("the pulled artifact has no layer equal to the pushed content: %v", layers)
	}

	// Without credentials the registry refuses.
	anon, err := reg.Repository("apps/podinfo")
	if err != nil {
		t.Fatal(err)
	}
	anon.Client = nil
	if _, err := oras.Resolve(ctx, anon, "v1", oras.DefaultResolveOptions); err == nil {
		t.Fatalf("anonymous resolve should fail on a registry with auth")
	}
}

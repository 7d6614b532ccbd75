package oci_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/oci"
)

func ExampleFetch() {
	ctx := context.Background()
	reg, _ := testenv.StartRegistry(testenv.RegistryOptions{Username: "flux", Password: "s3cret"})
	defer reg.Close()
	manifest, _ := reg.PushArtifact(ctx, "apps/podinfo", "v1.2.0", map[string]string{"deploy.yaml": "kind: Deployment\n"}, nil)

	dir, _ := os.MkdirTemp("", "store")
	defer os.RemoveAll(dir)
	store, _ := source.NewStore(dir, source.StoreOptions{})
	obj := source.Object{Kind: "OCIRepository", Namespace: "flux-system", Name: "podinfo"}

	res, err := oci.Fetch(ctx, store, obj, "oci://"+reg.Host()+"/apps/podinfo", oci.Options{
		Ref:              oci.Ref{SemVer: "~1.2"},
		DockerConfigJSON: reg.DockerConfigJSON(),
		Insecure:         true, // the test registry speaks plain HTTP
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Revision.String == "v1.2.0@"+manifest.Digest.String())
	fmt.Println(strings.SplitN(res.Revision.String, ":", 2)[0])

	out := filepath.Join(dir, "out")
	_ = store.Extract(ctx, res.Artifact, out, source.ExtractOptions{})
	b, _ := os.ReadFile(filepath.Join(out, "deploy.yaml"))
	fmt.Print(string(b))
	// Output:
	// true
	// v1.2.0@sha256
	// kind: Deployment
}

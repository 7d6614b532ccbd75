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
		Registry: oci.Registry{
			DockerConfigJSON: reg.DockerConfigJSON(),
			PlainHTTP:        true, // the test registry speaks plain HTTP
		},
		Ref: oci.Ref{SemVer: "~1.2"},
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

// A Helm chart is read into memory: Resolve pins the manifest, and
// ReadRevision returns the chart layer of exactly that manifest.
func ExampleReadRevision() {
	ctx := context.Background()
	reg, _ := testenv.StartRegistry(testenv.RegistryOptions{})
	defer reg.Close()
	_, _ = reg.PushChart(ctx, "charts/demo", map[string]string{"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 0.1.0\n"})

	url := "oci://" + reg.Host() + "/charts/demo"
	opts := oci.Options{
		Registry: oci.Registry{PlainHTTP: true}, // the test registry speaks plain HTTP
		Ref:      oci.Ref{Tag: "0.1.0"},
		Layer:    oci.LayerSelector{MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip"},
		MaxSize:  64 << 20,
	}
	rev, err := oci.Resolve(ctx, url, opts)
	if err != nil {
		panic(err)
	}
	chart, res, err := oci.ReadRevision(ctx, url, rev.String, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.SplitN(res.Revision.String, ":", 2)[0], int64(len(chart)) == res.Layer.Size)
	// Output:
	// 0.1.0@sha256 true
}

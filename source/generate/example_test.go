package generate_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// Compose a Helm chart from an OCI chart and a values file from Git.
func ExampleBuild() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "store")
	defer os.RemoveAll(dir)
	store, _ := source.NewStore(dir, source.StoreOptions{})

	sources := map[string]generate.Source{
		"chart": {FS: fstest.MapFS{
			"podinfo/Chart.yaml":  {Data: []byte("name: podinfo\nversion: 6.5.0\n")},
			"podinfo/values.yaml": {Data: []byte("replicas: 1\nimage:\n  tag: 6.5.0\n")},
		}, Revision: "6.5.0@sha256:" + strings.Repeat("a", 64)},
		"repo": {FS: fstest.MapFS{
			"values/prod.yaml": {Data: []byte("replicas: 3\n")},
		}, Revision: "main@sha1:" + strings.Repeat("b", 40)},
	}
	spec := generate.Spec{
		Revision: "@chart",
		Copy: []generate.Copy{
			{From: "@chart/podinfo/**", To: "@artifact/"},
			{From: "@repo/values/prod.yaml", To: "@artifact/values.yaml", Strategy: generate.Merge},
		},
	}
	obj := source.Object{Kind: "ExternalArtifact", Namespace: "apps", Name: "podinfo"}
	// One budget for all the builds of the process (64 MiB here).
	budget := generate.NewBudget(64 << 20)
	a, res, err := generate.Build(ctx, store, obj, sources, spec, generate.BuildOptions{Memory: budget})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Files)
	fmt.Println(strings.HasPrefix(a.Revision, "6.5.0@sha256:"))
	fmt.Println(budget.InUse(), budget.Peak() > 0)

	out, _ := os.MkdirTemp("", "out")
	defer os.RemoveAll(out)
	_ = store.Extract(ctx, a, out, source.ExtractOptions{})
	b, _ := os.ReadFile(out + "/values.yaml")
	fmt.Print(string(b))
	// Output:
	// [Chart.yaml values.yaml]
	// true
	// 0 true
	// image:
	//   tag: 6.5.0
	// replicas: 3
}

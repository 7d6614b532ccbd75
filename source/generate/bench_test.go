package generate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// BenchmarkBuild1000 composes 1,000 files from 3 sources and stores the
// result.
func BenchmarkBuild1000(b *testing.B) {
	srcs := map[string]generate.Source{}
	for s, alias := range []string{"backend", "frontend", "config"} {
		files := map[string]string{}
		for i := range 334 {
			if s == 2 && i == 332 {
				break // 334 + 334 + 332 = 1,000
			}
			files[fmt.Sprintf("deploy/part%d/f%03d.yaml", i%10, i)] = fmt.Sprintf("kind: ConfigMap\nmetadata:\n  name: %s-%d\ndata:\n  k: v%d\n", alias, i, i)
		}
		srcs[alias] = dirSource(b, files, "main@sha1:0000000000000000000000000000000000000000", false)
	}
	spec := generate.Spec{Copy: []generate.Copy{
		{From: "@backend/deploy/**", To: "@artifact/backend/"},
		{From: "@frontend/deploy/", To: "@artifact/"},
		{From: "@config/deploy/**/*.yaml", To: "@artifact/config/", Exclude: []string{"part9/f999.yaml"}},
	}}
	st, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "ExternalArtifact", Namespace: "ns", Name: "composite"}
	b.ResetTimer()
	for b.Loop() {
		_, res, err := generate.Build(context.Background(), st, obj, srcs, spec, generate.BuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Files) != 1000 {
			b.Fatalf("%d files", len(res.Files))
		}
	}
}

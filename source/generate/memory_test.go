package generate_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/generate"
)

// composeInDir is what Build did before it composed in memory: Compose
// into a directory, then Store.Archive of it.
func composeInDir(t *testing.T, st *source.Store, sources map[string]generate.Source, spec generate.Spec) (source.Artifact, generate.Result, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "out")
	res, err := generate.Compose(context.Background(), sources, spec, dst)
	if err != nil {
		return source.Artifact{}, res, err
	}
	a, err := st.Archive(context.Background(), source.Object{Kind: "ExternalArtifact", Namespace: "ns", Name: "dir"}, dst, "", source.ArchiveOptions{Verbatim: true})
	return a, res, err
}

// checkBuildMatchesCompose builds spec in memory (Build), in a directory,
// and with Build out of memory budget (on disk): all fail, or all give the
// same files and digest.
func checkBuildMatchesCompose(t *testing.T, st *source.Store, sources map[string]generate.Source, spec generate.Spec) {
	t.Helper()
	want, wantRes, wantErr := composeInDir(t, st, sources, spec)
	for _, budget := range []*generate.Budget{nil, generate.NewBudget(-1)} {
		got, res, err := generate.Build(context.Background(), st, source.Object{Kind: "ExternalArtifact", Namespace: "ns", Name: "memory"}, sources, spec, generate.BuildOptions{Memory: budget})
		checkSameBuild(t, spec, got, res, err, want, wantRes, wantErr)
	}
}

func checkSameBuild(t *testing.T, spec generate.Spec, got source.Artifact, res generate.Result, err error, want source.Artifact, wantRes generate.Result, wantErr error) {
	t.Helper()
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("%+v: Build: %v; in a directory: %v", spec.Copy, err, wantErr)
	case err != nil:
		for _, sentinel := range []error{generate.ErrUnknownAlias, generate.ErrNoMatch, generate.ErrInvalidPath, generate.ErrNotArchive, generate.ErrMerge} {
			if errors.Is(err, sentinel) != errors.Is(wantErr, sentinel) {
				t.Fatalf("%+v: Build: %v; in a directory: %v", spec.Copy, err, wantErr)
			}
		}
	case got.Digest != want.Digest || !slices.Equal(res.Files, wantRes.Files):
		t.Fatalf("%+v: Build gives %s %q; in a directory %s %q", spec.Copy, got.Digest, res.Files, want.Digest, wantRes.Files)
	}
}

// TestBuildMatchesCompose: the output composed in memory is archived to
// the bytes of the one composed in a directory, errors included.
func TestBuildMatchesCompose(t *testing.T) {
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srcs := fixtureSources(t, false)
	srcs["exec"] = generate.Source{FS: fstest.MapFS{
		"bin/run.sh":  {Data: []byte("#!/bin/sh\n"), Mode: 0o755},
		"values.yaml": {Data: []byte("a: 1\n"), Mode: 0o755},
	}}
	noExtract := fixtureSpec.Copy[:len(fixtureSpec.Copy)-1]
	for _, ops := range [][]generate.Copy{
		noExtract,
		{
			{From: "@backend/deploy/sub", To: "@artifact/nested"},
			{From: "@backend/", To: "@artifact/all/", Exclude: []string{"deploy"}},
			{From: "@backend/deploy/sub/", To: "@artifact/file-into-dir/"},
			{From: "@backend/deploy/a.yaml", To: "@artifact/file-into-dir/sub"},
		},
		// Modes: executables stay so, a file written again keeps its mode.
		{{From: "@exec/**", To: "@artifact/"}, {From: "@values/prod.yaml", To: "@artifact/values.yaml"}},
		{{From: "@values/prod.yaml", To: "@artifact/values.yaml"}, {From: "@exec/values.yaml", To: "@artifact/values.yaml", Strategy: generate.Merge}},
		// A file in the way of a directory, and the other way round.
		{{From: "@backend/deploy/a.yaml", To: "@artifact/x"}, {From: "@backend/deploy/sub/b.yaml", To: "@artifact/x/y.yaml"}},
		{{From: "@backend/deploy/a.yaml", To: "@artifact/x/y.yaml"}, {From: "@backend/deploy/a.yaml", To: "@artifact/x"}},
		{{From: "@backend/deploy/**", To: "@artifact/"}, {From: "@values/prod.yaml", To: "@artifact/sub", Strategy: generate.Merge}},
		{{From: "@backend/deploy/**", To: "@artifact/"}, {From: "@values/prod.yaml", To: "@artifact/sub/b.yaml/"}},
		{{From: "@values/prod.yaml", To: "@artifact/v.yaml"}, {From: "@values/list.yaml", To: "@artifact/v.yaml", Strategy: generate.Merge}},
		{{From: "@backend/nope/**", To: "@artifact/"}},
	} {
		checkBuildMatchesCompose(t, st, srcs, generate.Spec{Copy: ops})
	}
}

// FuzzBuildMatchesCompose runs two arbitrary operations in memory and in a
// directory, and compares the outcomes.
func FuzzBuildMatchesCompose(f *testing.F) {
	f.Add("@src/a/", "@artifact/out/", "*.md", "@src/top.yaml", "@artifact/out/a/b.yaml", true)
	f.Add("@src/a/**", "@artifact/x", "c/", "@src/a/b.yaml", "@artifact/x", false)
	f.Add("@src/**/*.yaml", "@artifact/", "", "@src/bin/run.sh", "@artifact/a/", false)
	f.Add("@src/a/b.yaml", "@artifact/c", "", "@src/a/c/", "@artifact/", true)
	srcs := map[string]generate.Source{"src": {FS: fstest.MapFS{
		"a/b.yaml":    {Data: []byte("b: 1\n")},
		"a/c/d.yaml":  {Data: []byte("d: 1\n")},
		"a/README.md": {Data: []byte("x")},
		"top.yaml":    {Data: []byte("t: 1\nb: {c: 2}\n")},
		"bin/run.sh":  {Data: []byte("#!/bin/sh\n"), Mode: 0o755},
	}}}
	st, err := source.NewStore(f.TempDir(), source.StoreOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, from1, to1, exclude, from2, to2 string, merge bool) {
		if len(from1)+len(to1)+len(exclude)+len(from2)+len(to2) > 512 {
			return
		}
		second := generate.Copy{From: from2, To: to2}
		if merge {
			second.Strategy = generate.Merge
		}
		checkBuildMatchesCompose(t, st, srcs, generate.Spec{Copy: []generate.Copy{{From: from1, To: to1, Exclude: []string{exclude}}, second}})
	})
}

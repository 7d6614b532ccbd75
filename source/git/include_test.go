package git_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

// TestFetchIncludes copies included trees into the artifact at their
// paths (a sub-directory of the tree, over files of the same name, with
// paths that try to leave the tree kept inside it), FetchRevision rebuilds
// the same digest with the same includes, and another included content
// makes another digest at the same revision.
func TestFetchIncludes(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	shared := fstest.MapFS{
		"base/config.yaml":  {Data: []byte("shared: 1\n")},
		"base/nested/x.txt": {Data: []byte("x")},
		"other.txt":         {Data: []byte("not copied")},
	}
	incs := []git.Include{
		{Name: "shared", FS: shared, FromPath: "base", ToPath: "vendor/shared"},
		{Name: "over", FS: fstest.MapFS{"app.yaml": {Data: []byte("version: included\n")}}, ToPath: "../../deploy"},
	}
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	opts := git.Options{Ref: git.Ref{Tag: "v1.0.0"}, Auth: auth, Include: incs}
	res, err := git.Fetch(ctx, st, obj, f.url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Artifact.Revision != "v1.0.0@sha1:"+f.first {
		t.Fatalf("revision %q: includes must not change it", res.Artifact.Revision)
	}
	for p, want := range map[string]string{
		"vendor/shared/config.yaml":  "shared: 1\n",
		"vendor/shared/nested/x.txt": "x",
		"vendor/shared/other.txt":    "",
		"other.txt":                  "",
		"deploy/app.yaml":            "version: included\n",
	} {
		if got := fileOf(t, st, res.Artifact, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	fresh, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	again, err := git.FetchRevision(ctx, fresh, obj, f.url, res.Artifact.Revision, opts)
	if err != nil || again.Artifact.Digest != res.Artifact.Digest {
		t.Fatalf("rebuilt %+v (%v), want digest %s", again.Artifact, err, res.Artifact.Digest)
	}
	shared["base/config.yaml"] = &fstest.MapFile{Data: []byte("shared: 2\n")}
	changed, err := git.Fetch(ctx, st, obj, f.url, opts)
	if err != nil || changed.Artifact.Digest == res.Artifact.Digest || changed.Artifact.Revision != res.Artifact.Revision {
		t.Fatalf("changed include: %+v (%v)", changed.Artifact, err)
	}

	opts.Include = []git.Include{{Name: "shared", FS: shared, FromPath: "missing", ToPath: "x"}}
	_, err = git.Fetch(ctx, st, obj, f.url, opts)
	if !errors.Is(err, git.ErrIncludePath) {
		t.Fatalf("missing fromPath: %v", err)
	}
	mustContainAll(t, err.Error(), `include "shared"`, `"missing"`, "ns/app")
}

func mustContainAll(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("%q does not contain %q", s, sub)
		}
	}
}

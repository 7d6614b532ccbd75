package git_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

func ExampleFetch() {
	ctx := context.Background()
	srv, _ := testenv.StartGitServer(testenv.GitOptions{Username: "flux", Password: "s3cret"})
	defer srv.Close()
	repo, _ := srv.Repo("podinfo.git")
	commit, _ := repo.Commit("main", map[string]string{"kustomization.yaml": "resources: []\n"}, "init")

	dir, _ := os.MkdirTemp("", "store")
	defer os.RemoveAll(dir)
	store, _ := source.NewStore(dir, source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "flux-system", Name: "podinfo"}
	opts := git.Options{Ref: git.Ref{Branch: "main"}, Auth: git.Auth{Username: "flux", Password: "s3cret"}}

	res, err := git.Fetch(ctx, store, obj, repo.URL(), opts)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Revision.String == "main@sha1:"+commit, strings.HasPrefix(res.Artifact.Digest, "sha256:"))

	// Nothing moved: ls-remote answers and nothing is cloned.
	opts.LastRevision = res.Revision.String
	res, _ = git.Fetch(ctx, store, obj, repo.URL(), opts)
	fmt.Println("unchanged:", res.Unchanged)
	// Output:
	// true true
	// unchanged: true
}

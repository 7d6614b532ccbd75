package testenv_test

import (
	"errors"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/cozystack/cozy-aio/internal/testenv"
)

func TestGitServerPushAndCloneWithAuth(t *testing.T) {
	srv, err := testenv.StartGitServer(testenv.GitOptions{Username: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, err := srv.Repo("team/app.git")
	if err != nil {
		t.Fatal(err)
	}
	first, err := repo.Commit("main", map[string]string{"deploy/cm.yaml": "kind: ConfigMap\n"}, "first")
	if err != nil {
		t.Fatalf("first commit: %v", err)
	}
	second, err := repo.Commit("main", map[string]string{"README.md": "hello\n"}, "second")
	if err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if err := repo.Tag("v1.0.0", first); err != nil {
		t.Fatalf("tag: %v", err)
	}

	clone, err := gogit.Clone(memory.NewStorage(), nil, &gogit.CloneOptions{
		URL:           repo.URL(),
		Auth:          &githttp.BasicAuth{Username: "alice", Password: "s3cret"},
		ReferenceName: plumbing.NewBranchReferenceName("main"),
		SingleBranch:  true,
		Depth:         1,
	})
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	head, err := clone.Head()
	if err != nil {
		t.Fatal(err)
	}
	if head.Hash().String() != second {
		t.Fatalf("HEAD = %s, want %s", head.Hash(), second)
	}
	commit, err := clone.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := commit.Tree()
	if err != nil {
		t.Fatal(err)
	}
	// A commit is a snapshot: the second one replaced the tree.
	if _, err := tree.File("deploy/cm.yaml"); err == nil {
		t.Fatalf("deploy/cm.yaml should be gone in the second commit")
	}
	if f, err := tree.File("README.md"); err != nil {
		t.Fatalf("README.md: %v", err)
	} else if s, _ := f.Contents(); s != "hello\n" {
		t.Fatalf("README.md = %q", s)
	}

	remote := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{repo.URL()}})
	refs, err := remote.List(&gogit.ListOptions{Auth: &githttp.BasicAuth{Username: "alice", Password: "s3cret"}})
	if err != nil {
		t.Fatalf("ls-remote: %v", err)
	}
	var sawTag bool
	for _, r := range refs {
		if r.Name() == plumbing.NewTagReferenceName("v1.0.0") {
			sawTag = true
		}
	}
	if !sawTag {
		t.Fatalf("tag v1.0.0 not on the server: %v", refs)
	}

	_, err = gogit.Clone(memory.NewStorage(), nil, &gogit.CloneOptions{
		URL:  repo.URL(),
		Auth: &githttp.BasicAuth{Username: "alice", Password: "wrong"},
	})
	if !errors.Is(err, transport.ErrAuthenticationRequired) && !errors.Is(err, transport.ErrAuthorizationFailed) {
		t.Fatalf("wrong password: want an authentication error, got %v", err)
	}
}

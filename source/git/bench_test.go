package git_test

import (
	"context"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

// BenchmarkFetch10k fetches and stores a repository of 10,000 files and,
// in the same run against the same server, clones it with
// `git clone --depth 1`.
func BenchmarkFetch10k(b *testing.B) {
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	repo, _ := srv.Repo("big.git")
	files := make(map[string]string, 10000)
	for i := range 10000 {
		files[fmt.Sprintf("apps/app%03d/manifest%02d.yaml", i/100, i%100)] = fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: app%03d\ndata:\n  key: value-%d\n", i, i/100, i)
	}
	commit, err := repo.Commit("main", files, "10k files")
	if err != nil {
		b.Fatal(err)
	}
	// Both clients talk to git's own http-backend (CGI) over the same bare
	// repository: gitkit, behind testenv's server, hangs on the git CLI's
	// multi-round shallow negotiation.
	url := httpBackend(b, srv.Root()) + "/big.git"
	ctx := context.Background()

	b.Run("cozy-aio-fetch-store", func(b *testing.B) {
		st, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
		obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "big"}
		for b.Loop() {
			res, err := git.Fetch(ctx, st, obj, url, git.Options{Ref: git.Ref{Branch: "main"}})
			if err != nil || res.Revision.Commit != commit {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("git-clone-depth1", func(b *testing.B) {
		if _, err := exec.LookPath("git"); err != nil {
			b.Skip("git CLI not installed")
		}
		for b.Loop() {
			dir, _ := os.MkdirTemp("", "clone-")
			out, err := exec.Command("git", "clone", "--quiet", "--depth", "1", "--branch", "main", url, dir).CombinedOutput()
			os.RemoveAll(dir)
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
	b.Run("cozy-aio-unchanged-ls-remote", func(b *testing.B) {
		st, _ := source.NewStore(b.TempDir(), source.StoreOptions{})
		obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "big"}
		last := "main@sha1:" + commit
		for b.Loop() {
			res, err := git.Fetch(ctx, st, obj, url, git.Options{Ref: git.Ref{Branch: "main"}, LastRevision: last})
			if err != nil || !res.Unchanged {
				b.Fatal(res, err)
			}
		}
	})
}

// httpBackend serves the bare repositories under root with git
// http-backend and returns the base URL.
func httpBackend(b *testing.B, root string) string {
	b.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		b.Skip("git CLI not installed")
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}

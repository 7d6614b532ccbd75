package git

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// Checkout fetches the reference into dir, which must be empty or absent,
// and returns the revision it checked out. The Git objects stay in memory:
// dir receives the work tree only, with no .git directory.
func Checkout(ctx context.Context, repoURL, dir string, opts Options) (Revision, error) {
	want, err := Resolve(ctx, repoURL, opts)
	if err != nil {
		return Revision{}, err
	}
	return checkout(ctx, repoURL, osfs.New(dir), want, opts)
}

// checkout fetches, into the work tree wt, exactly the resolved reference (any refname, not only
// branches and tags) with an explicit refspec, then checks out its commit.
// A bare commit fetches every branch and tag, with full history, to find it.
func checkout(ctx context.Context, repoURL string, wt billy.Filesystem, want Revision, opts Options) (Revision, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return Revision{}, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	auth, cleanup, err := opts.Auth.method(ep)
	if err != nil {
		return Revision{}, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	defer cleanup()
	via, release, err := opts.connect(ctx, ep)
	if err != nil {
		return Revision{}, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	defer release()
	repo, err := gogit.Init(memory.NewStorage(), wt)
	if err != nil {
		return Revision{}, err
	}
	rem, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{repoURL}})
	if err != nil {
		return Revision{}, err
	}
	specs := []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}
	if want.Ref != "" {
		specs = []config.RefSpec{config.RefSpec("+" + want.Ref + ":" + want.Ref)}
	}
	err = rem.FetchContext(ctx, &gogit.FetchOptions{
		RefSpecs: specs, Auth: auth, Depth: opts.depth(), Tags: gogit.NoTags, ProxyOptions: via,
	})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return Revision{}, fetcher.Classify(ctx, repoURL, err)
	}
	commit := want.Commit
	var tag *object.Tag
	if opts.Ref.Commit == "" {
		// The reference may have moved since ls-remote: report what is fetched.
		ref, err := repo.Reference(want.Ref, true)
		if err != nil {
			return Revision{}, fetcher.Classify(ctx, repoURL, err)
		}
		commit = ref.Hash().String()
		if t, err := repo.TagObject(ref.Hash()); err == nil {
			commit, tag = t.Target.String(), t
		}
	}
	if opts.Verify != nil {
		c, err := signedCommit(repo, commit, tag, want.Ref)
		if err != nil {
			return Revision{}, fetcher.Classify(ctx, repoURL, err)
		}
		if err := opts.Verify(c); err != nil {
			return Revision{}, err
		}
	}
	return revision(want.Ref, commit, opts.Ref), checkoutCommit(ctx, repoURL, repo, commit, opts.sparse())
}

func checkoutCommit(ctx context.Context, repoURL string, repo *gogit.Repository, commit string, sparse []string) error {
	h := plumbing.NewHash(commit)
	if _, err := repo.CommitObject(h); err != nil {
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return fmt.Errorf("git %s: %w: commit %s", redact.String(repoURL), source.ErrRefNotFound, commit)
		}
		return fetcher.Classify(ctx, repoURL, err)
	}
	w, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := w.Checkout(&gogit.CheckoutOptions{Hash: h, Force: true, SparseCheckoutDirectories: sparse}); err != nil {
		return fetcher.Classify(ctx, repoURL, err)
	}
	return nil
}

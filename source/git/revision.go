package git

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cozystack/cozy-aio/source"
)

// FetchRevision stores obj's artifact for exactly revision, a revision as
// Fetch returned it ("main@sha1:<commit>", "v1.0.0@sha1:<commit>",
// "refs/pull/1/head@sha1:<commit>" or "sha1:<commit>"), wherever the
// remote's references point now. The tree is archived as Fetch archives it,
// with opts.Ignore, so the same commit and patterns give the same digest;
// the artifact's revision is the given string. opts.Ref and
// opts.LastRevision are not used.
//
// When a reference still points at the commit, the fetch is as shallow as
// Fetch's; otherwise it fetches the whole history of the named reference
// (of every branch and tag for a bare commit or a reference that is gone)
// to find the commit.
func FetchRevision(ctx context.Context, store *source.Store, obj source.Object, repoURL, revision string, opts Options) (Result, error) {
	name, commit, err := parseRevision(revision)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	wt, ref, err := checkoutCommitOf(ctx, repoURL, name, commit, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	if err := copyIncludes(wt, opts.Include); err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	a, err := store.ArchiveFS(ctx, obj, billyFS{wt}, revision, source.ArchiveOptions{Ignore: opts.Ignore})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	return Result{Revision: Revision{Ref: ref, Commit: commit, String: revision}, Artifact: a}, nil
}

// parseRevision splits a revision as revision() formats it into the
// reference name ("" for a bare commit) and the commit.
func parseRevision(s string) (name, commit string, err error) {
	commit, ok := strings.CutPrefix(s, "sha1:")
	if !ok {
		i := strings.LastIndex(s, "@sha1:")
		if i <= 0 {
			return "", "", fmt.Errorf("git revision %q is not <ref>@sha1:<commit> or sha1:<commit>", s)
		}
		name, commit = s[:i], s[i+len("@sha1:"):]
	}
	if !hexSHA1.MatchString(commit) {
		return "", "", fmt.Errorf("git revision %q: %w: commit %q is not a 40-hex SHA-1", s, source.ErrRefNotFound, commit)
	}
	return name, commit, nil
}

// checkoutCommitOf checks commit out into a fresh in-memory work tree and
// returns the tree and the reference it was fetched from ("" when every
// branch and tag was).
func checkoutCommitOf(ctx context.Context, repoURL, name, commit string, opts Options) (billy.Filesystem, plumbing.ReferenceName, error) {
	refs, err := listRemote(ctx, repoURL, opts)
	if err != nil {
		return nil, "", err
	}
	at, named := locate(refs, name, commit)
	if at != "" {
		wt := memfs.New()
		shallow := opts
		shallow.Ref = Ref{}
		got, err := checkout(ctx, repoURL, wt, Revision{Ref: at}, shallow)
		if err != nil {
			return nil, "", err
		}
		if got.Commit == commit {
			return wt, at, nil
		}
		// The reference moved after ls-remote: look in the history.
	}
	wt := memfs.New()
	deep := opts
	deep.Ref = Ref{Commit: commit}
	if _, err := checkout(ctx, repoURL, wt, Revision{Ref: named, Commit: commit}, deep); err != nil {
		return nil, "", err
	}
	return wt, named, nil
}

// locate returns an advertised reference that points at commit, preferring
// the ones name may stand for (a short name is a branch or a tag), and the
// first of those that is advertised at all.
func locate(refs []*plumbing.Reference, name, commit string) (at, named plumbing.ReferenceName) {
	var candidates []plumbing.ReferenceName
	switch {
	case name == "":
	case strings.HasPrefix(name, "refs/"):
		candidates = []plumbing.ReferenceName{plumbing.ReferenceName(name)}
	default:
		candidates = []plumbing.ReferenceName{plumbing.NewBranchReferenceName(name), plumbing.NewTagReferenceName(name)}
	}
	points := map[plumbing.ReferenceName]string{}
	var order []plumbing.ReferenceName
	for _, r := range refs {
		if r.Type() != plumbing.HashReference || !strings.HasPrefix(r.Name().String(), "refs/") {
			continue
		}
		n, peeled := strings.CutSuffix(r.Name().String(), "^{}")
		rn := plumbing.ReferenceName(n)
		if _, seen := points[rn]; !seen {
			order = append(order, rn)
		}
		if _, set := points[rn]; !set || peeled {
			points[rn] = r.Hash().String()
		}
	}
	for _, c := range candidates {
		if _, ok := points[c]; ok && named == "" {
			named = c
		}
		if points[c] == commit && at == "" {
			at = c
		}
	}
	for _, rn := range order {
		if at == "" && points[rn] == commit {
			at = rn
		}
	}
	return at, named
}

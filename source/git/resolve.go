package git

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// Revision is a resolved reference.
type Revision struct {
	// Ref is the full reference name that was resolved, e.g.
	// refs/heads/main; empty for a bare commit.
	Ref plumbing.ReferenceName
	// Commit is the commit SHA-1, 40 hex digits.
	Commit string
	// String is the Flux revision, e.g. "main@sha1:<commit>".
	String string
}

var hexSHA1 = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Resolve finds the commit that opts.Ref points to with ls-remote, without
// cloning. A Commit ref resolves without network access.
func Resolve(ctx context.Context, repoURL string, opts Options) (Revision, error) {
	if c := opts.Ref.Commit; c != "" {
		if !hexSHA1.MatchString(c) {
			return Revision{}, fmt.Errorf("git %s: %w: commit %q is not a 40-hex SHA-1", redact.String(repoURL), source.ErrRefNotFound, c)
		}
		return revision(branchRef(opts.Ref.Branch), c, opts.Ref), nil
	}
	refs, err := listRemote(ctx, repoURL, opts)
	if err != nil {
		return Revision{}, err
	}
	name, commit, err := pick(refs, opts.Ref)
	if err != nil {
		return Revision{}, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	return revision(name, commit, opts.Ref), nil
}

func branchRef(b string) plumbing.ReferenceName {
	if b == "" {
		return ""
	}
	return plumbing.NewBranchReferenceName(b)
}

// revision formats the Flux revision string.
func revision(name plumbing.ReferenceName, commit string, ref Ref) Revision {
	r := Revision{Ref: name, Commit: commit}
	switch {
	case name == "":
		r.String = "sha1:" + commit
	case ref.Name != "" && ref.Commit == "":
		r.String = name.String() + "@sha1:" + commit
	default:
		r.String = name.Short() + "@sha1:" + commit
	}
	return r
}

func listRemote(ctx context.Context, repoURL string, opts Options) ([]*plumbing.Reference, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	auth, cleanup, err := opts.Auth.method(ep)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	defer cleanup()
	via, release, err := opts.connect(ctx, ep)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	defer release()
	rem := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{repoURL}})
	refs, err := rem.ListContext(ctx, &gogit.ListOptions{Auth: auth, PeelingOption: gogit.AppendPeeled, ProxyOptions: via})
	return refs, fetcher.Classify(ctx, repoURL, err)
}

// pick chooses the reference for ref among the advertised ones and returns
// its name and the commit it points to, peeling annotated tags.
func pick(refs []*plumbing.Reference, ref Ref) (plumbing.ReferenceName, string, error) {
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	var name plumbing.ReferenceName
	switch {
	case ref.Name != "":
		name = plumbing.ReferenceName(ref.Name)
	case ref.SemVer != "":
		tag, err := latestSemver(refs, ref.SemVer)
		if err != nil {
			return "", "", err
		}
		name = plumbing.NewTagReferenceName(tag)
	case ref.Tag != "":
		name = plumbing.NewTagReferenceName(ref.Tag)
	case ref.Branch != "":
		name = plumbing.NewBranchReferenceName(ref.Branch)
	default:
		head, ok := byName[plumbing.HEAD]
		if !ok {
			return "", "", fmt.Errorf("%w: the remote has no HEAD", source.ErrRefNotFound)
		}
		if head.Type() != plumbing.SymbolicReference {
			return "", "", fmt.Errorf("%w: the remote HEAD is detached; set a branch", source.ErrRefNotFound)
		}
		name = head.Target()
	}
	if peeled, ok := byName[name+"^{}"]; ok {
		return name, peeled.Hash().String(), nil
	}
	r, ok := byName[name]
	if !ok || r.Type() != plumbing.HashReference {
		return "", "", fmt.Errorf("%w: %s", source.ErrRefNotFound, name)
	}
	return name, r.Hash().String(), nil
}

// latestSemver returns the highest tag satisfying the range. Tags that are
// not versions are ignored, as Flux does.
func latestSemver(refs []*plumbing.Reference, rng string) (string, error) {
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("%w: semver range %q: %w", source.ErrNoSemverMatch, rng, err)
	}
	var best *semver.Version
	var bestTag string
	for _, r := range refs {
		if !r.Name().IsTag() || strings.HasSuffix(r.Name().String(), "^{}") {
			continue
		}
		tag := r.Name().Short()
		v, err := semver.NewVersion(tag)
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || (v.Equal(best) && tag < bestTag) {
			best, bestTag = v, tag
		}
	}
	if best == nil {
		return "", fmt.Errorf("%w: %q", source.ErrNoSemverMatch, rng)
	}
	return bestTag, nil
}

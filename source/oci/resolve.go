package oci

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/cozystack/cozy-aio/source"
)

// Revision is a resolved manifest.
type Revision struct {
	// Tag is the tag that was resolved; empty for a digest ref.
	Tag string
	// Digest is the manifest digest, "sha256:<hex>".
	Digest string
	// String is the Flux revision: "<tag>@sha256:<hex>" or "sha256:<hex>".
	String string
}

// Resolve finds the manifest digest that opts.Ref points to, without
// downloading the manifest.
func Resolve(ctx context.Context, repoURL string, opts Options) (Revision, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	repo, release, err := repository(repoURL, opts.Registry)
	if err != nil {
		return Revision{}, err
	}
	defer release()
	return resolve(ctx, repo, repoURL, opts.Ref)
}

func resolve(ctx context.Context, repo *remote.Repository, repoURL string, ref Ref) (Revision, error) {
	var tag string
	switch {
	case ref.Digest != "":
		d, err := digest.Parse(ref.Digest)
		if err != nil {
			return Revision{}, fmt.Errorf("oci %s: %w: digest %q: %w", repoURL, source.ErrRefNotFound, ref.Digest, err)
		}
		desc, err := repo.Resolve(ctx, d.String())
		if err != nil {
			return Revision{}, fetcher.Classify(ctx, repoURL, err)
		}
		if desc.Digest != d {
			return Revision{}, fmt.Errorf("oci %s: %w: asked for %s, registry answered %s", repoURL, source.ErrDigestMismatch, d, desc.Digest)
		}
		return Revision{Digest: d.String(), String: d.String()}, nil
	case ref.SemVer != "":
		t, err := latestSemver(ctx, repo, repoURL, ref.SemVer, ref.SemVerFilter)
		if err != nil {
			return Revision{}, err
		}
		tag = t
	case ref.Tag != "":
		tag = ref.Tag
	default:
		tag = "latest"
	}
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		return Revision{}, fetcher.Classify(ctx, repoURL, fmt.Errorf("tag %s: %w", tag, err))
	}
	return Revision{Tag: tag, Digest: desc.Digest.String(), String: tag + "@" + desc.Digest.String()}, nil
}

// parseRevision reads a revision as resolve formats it.
func parseRevision(s string) (Revision, error) {
	tag, dg := "", s
	if i := strings.LastIndex(s, "@"); i >= 0 {
		tag, dg = s[:i], s[i+1:]
		if tag == "" {
			return Revision{}, fmt.Errorf("%w: revision %q has an empty tag", source.ErrRefNotFound, s)
		}
	}
	d, err := digest.Parse(dg)
	if err != nil {
		return Revision{}, fmt.Errorf("%w: revision %q is not <tag>@sha256:<hex> or sha256:<hex>: %w", source.ErrRefNotFound, s, err)
	}
	return Revision{Tag: tag, Digest: d.String(), String: s}, nil
}

func latestSemver(ctx context.Context, repo *remote.Repository, repoURL, rng, filter string) (string, error) {
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("oci %s: %w: semver range %q: %w", repoURL, source.ErrNoSemverMatch, rng, err)
	}
	var re *regexp.Regexp
	if filter != "" {
		if re, err = regexp.Compile(filter); err != nil {
			return "", fmt.Errorf("oci %s: %w: semver filter %q: %w", repoURL, source.ErrNoSemverMatch, filter, err)
		}
	}
	var tags []string
	err = repo.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		return nil
	})
	if err != nil {
		return "", fetcher.Classify(ctx, repoURL, err)
	}
	sort.Strings(tags) // ties between equal versions resolve the same way every time
	var best *semver.Version
	var bestTag string
	for _, t := range tags {
		if re != nil && !re.MatchString(t) {
			continue
		}
		v, err := semver.NewVersion(strings.ReplaceAll(t, "_", "+"))
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestTag = v, t
		}
	}
	if best == nil {
		if filter != "" {
			return "", fmt.Errorf("oci %s: %w: %q with filter %q", repoURL, source.ErrNoSemverMatch, rng, filter)
		}
		return "", fmt.Errorf("oci %s: %w: %q", repoURL, source.ErrNoSemverMatch, rng)
	}
	return bestTag, nil
}

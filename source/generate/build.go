package generate

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/cozystack/cozy-aio/source"
)

// OriginRevisionKey is the metadata key of the origin revision, the OCI
// annotation Flux uses.
const OriginRevisionKey = "org.opencontainers.image.revision"

// Build composes the spec and stores the result as obj's artifact,
// archived verbatim (no ignore rules: the sources were filtered when they
// were fetched). Its revision is the one the spec names, or
// "latest@<digest>" of the archive, which is deterministic: the same
// inputs give the same digest. It does not apply retention.
//
// The output is composed in memory, or in a temporary directory when an
// operation extracts a tarball; the artifact is the same either way, the
// one Compose and Store.Archive give.
func Build(ctx context.Context, store *source.Store, obj source.Object, sources map[string]Source, spec Spec) (source.Artifact, Result, error) {
	res, err := revisions(sources, spec)
	if err != nil {
		return source.Artifact{}, Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	var a source.Artifact
	if slices.ContainsFunc(spec.Copy, func(c Copy) bool { return c.Strategy == Extract }) {
		a, res, err = buildInDir(ctx, store, obj, sources, spec)
	} else {
		tree := newMemoryTree()
		if res, err = compose(ctx, sources, spec, res, &composer{out: tree}); err != nil {
			return source.Artifact{}, Result{}, fmt.Errorf("%s: %w", obj, err)
		}
		a, err = store.ArchiveFS(ctx, obj, tree, res.Revision, source.ArchiveOptions{Verbatim: true})
	}
	if err != nil {
		return source.Artifact{}, Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	if a.Revision == "" {
		a.Revision = "latest@" + a.Digest
		res.Revision = a.Revision
	}
	if res.OriginRevision != "" {
		a.Metadata = map[string]string{OriginRevisionKey: res.OriginRevision}
	}
	return a, res, nil
}

// buildInDir composes the spec in a temporary directory and archives it.
func buildInDir(ctx context.Context, store *source.Store, obj source.Object, sources map[string]Source, spec Spec) (source.Artifact, Result, error) {
	tmp, err := os.MkdirTemp("", "cozy-generate-")
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	defer os.RemoveAll(tmp)
	res, err := Compose(ctx, sources, spec, tmp)
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	a, err := store.Archive(ctx, obj, tmp, res.Revision, source.ArchiveOptions{Verbatim: true})
	return a, res, err
}

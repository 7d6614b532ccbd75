package generate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cozystack/cozy-aio/source"
)

// OriginRevisionKey is the metadata key of the origin revision, the OCI
// annotation Flux uses.
const OriginRevisionKey = "org.opencontainers.image.revision"

// BuildOptions configures Build. The zero value works.
type BuildOptions struct {
	// Memory is the budget the output is held in while it is composed,
	// shared with every build given the same Budget. Default: nil, a
	// budget of DefaultMemoryBytes for this build alone.
	Memory *Budget
	// MaxBytes caps the output's files, in memory or on disk: a larger
	// output fails with an error wrapping source.ErrTooLarge. Default:
	// source.DefaultMaxSize (512 MiB), what source.Extract, with which the
	// artifact's consumers unpack it, takes by default. Negative: no cap.
	MaxBytes int64
}

func (o BuildOptions) withDefaults() BuildOptions {
	if o.Memory == nil {
		o.Memory = NewBudget(0)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = source.DefaultMaxSize
	}
	return o
}

// Build composes the spec and stores the result as obj's artifact,
// archived verbatim (no ignore rules: the sources were filtered when they
// were fetched). Its revision is the one the spec names, or
// "latest@<digest>" of the archive, which is deterministic: the same
// inputs give the same digest. It does not apply retention.
//
// The output is composed in memory, within opts.Memory, until the archive
// is written. It is composed in a temporary directory instead, as
// source-watcher composes every output, when an operation extracts a
// tarball or when the output outgrows what the budget has left: then the
// composition starts again on disk, copying files as streams, so that a
// legitimately large output still builds, slower, while the memory of all
// builds stays within the budget. The artifact is the same either way, the
// one Compose and Store.Archive give.
func Build(ctx context.Context, store *source.Store, obj source.Object, sources map[string]Source, spec Spec, opts BuildOptions) (source.Artifact, Result, error) {
	res, err := revisions(sources, spec)
	if err != nil {
		return source.Artifact{}, Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	a, res, err := build(ctx, store, obj, sources, spec, res, opts.withDefaults())
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

// build composes and archives in memory when it can, else on disk.
func build(ctx context.Context, store *source.Store, obj source.Object, sources map[string]Source, spec Spec, res Result, opts BuildOptions) (source.Artifact, Result, error) {
	if !slices.ContainsFunc(spec.Copy, func(c Copy) bool { return c.Strategy == Extract }) {
		a, built, err := buildInMemory(ctx, store, obj, sources, spec, res, opts)
		if !errors.Is(err, errOverBudget) {
			return a, built, err
		}
	}
	return buildInDir(ctx, store, obj, sources, spec, res, opts.MaxBytes)
}

// buildInMemory composes the spec in a memoryTree and archives it, holding
// the tree's bytes in the budget until the archive is written.
func buildInMemory(ctx context.Context, store *source.Store, obj source.Object, sources map[string]Source, spec Spec, res Result, opts BuildOptions) (source.Artifact, Result, error) {
	tree := newMemoryTree()
	m := &meter{max: opts.MaxBytes, budget: opts.Memory}
	defer m.release()
	res, err := compose(ctx, sources, spec, res, &composer{out: tree, meter: m})
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	a, err := store.ArchiveFS(ctx, obj, tree, res.Revision, source.ArchiveOptions{Verbatim: true})
	return a, res, err
}

// buildInDir composes the spec in a temporary directory and archives it.
func buildInDir(ctx context.Context, store *source.Store, obj source.Object, sources map[string]Source, spec Spec, res Result, maxBytes int64) (source.Artifact, Result, error) {
	tmp, err := os.MkdirTemp("", "cozy-generate-")
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	defer os.RemoveAll(tmp)
	res, err = composeDir(ctx, sources, spec, res, tmp, &meter{max: maxBytes})
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	a, err := store.Archive(ctx, obj, tmp, res.Revision, source.ArchiveOptions{Verbatim: true})
	return a, res, err
}

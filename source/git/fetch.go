package git

import (
	"context"
	"fmt"

	"github.com/go-git/go-billy/v5/memfs"

	"github.com/cozystack/cozy-aio/source"
)

// Result is the outcome of Fetch.
type Result struct {
	// Revision is the resolved revision.
	Revision Revision
	// Unchanged is true when the remote still resolves to
	// Options.LastRevision: nothing was cloned and Artifact is zero.
	Unchanged bool
	// Artifact is the stored artifact when Unchanged is false.
	Artifact source.Artifact
}

// Fetch resolves the reference, and unless it equals opts.LastRevision,
// fetches it into an in-memory work tree, archives the tree (honouring
// .sourceignore and opts.Ignore) and stores it as obj's artifact. It does
// not apply retention: call store.GC once the artifact is recorded.
func Fetch(ctx context.Context, store *source.Store, obj source.Object, repoURL string, opts Options) (Result, error) {
	want, err := Resolve(ctx, repoURL, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	if opts.LastRevision != "" && want.String == opts.LastRevision {
		return Result{Revision: want, Unchanged: true}, nil
	}
	// The work tree stays in memory: a shallow GitOps tree is small, and
	// writing 10,000 files to disk only to read them back costs more than
	// the fetch itself.
	wt := memfs.New()
	got, err := checkout(ctx, repoURL, wt, want, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	if err := copyIncludes(wt, opts.Include); err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	a, err := store.ArchiveFS(ctx, obj, billyFS{wt}, got.String, source.ArchiveOptions{Ignore: opts.Ignore})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	return Result{Revision: got, Artifact: a}, nil
}

package git

import (
	"context"
	"fmt"
	"os"

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
// clones it into a temporary directory, archives the tree (honouring
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
	tmp, err := os.MkdirTemp("", "cozy-git-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	got, err := checkout(ctx, repoURL, tmp, want, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	a, err := store.Archive(ctx, obj, tmp, got.String, source.ArchiveOptions{Ignore: opts.Ignore})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	return Result{Revision: got, Artifact: a}, nil
}

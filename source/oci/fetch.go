package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// Result is the outcome of Pull and Fetch.
type Result struct {
	// Revision is the resolved revision.
	Revision Revision
	// Unchanged is true when the registry still resolves to
	// Options.LastRevision: nothing was pulled and Artifact is zero.
	Unchanged bool
	// Artifact is the stored artifact (Fetch only), with the manifest
	// annotations as Metadata.
	Artifact source.Artifact
	// Layer is the selected layer.
	Layer ocispec.Descriptor
	// Annotations are the manifest annotations.
	Annotations map[string]string
}

// Pull resolves the reference and extracts the selected layer into dir,
// whatever opts.Layer.Operation says.
func Pull(ctx context.Context, repoURL, dir string, opts Options) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	repo, release, err := repository(repoURL, opts.Registry)
	if err != nil {
		return Result{}, err
	}
	defer release()
	rev, err := resolve(ctx, repo, repoURL, opts.Ref)
	if err != nil {
		return Result{}, err
	}
	return pull(ctx, repo, repoURL, rev, opts.Layer, opts.maxSize(), func(r io.Reader) error {
		return source.Extract(ctx, r, dir, source.ExtractOptions{MaxSize: opts.MaxSize})
	})
}

// Fetch resolves the reference, and unless it equals opts.LastRevision,
// pulls the selected layer and stores it as obj's artifact: extracted and
// archived again (honouring .sourceignore and opts.Ignore), or copied as
// is. It does not apply retention: call store.GC once the artifact is
// recorded.
func Fetch(ctx context.Context, store *source.Store, obj source.Object, repoURL string, opts Options) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	repo, release, err := repository(repoURL, opts.Registry)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	defer release()
	rev, err := resolve(ctx, repo, repoURL, opts.Ref)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	if opts.LastRevision != "" && rev.String == opts.LastRevision {
		return Result{Revision: rev, Unchanged: true}, nil
	}
	if opts.Verify != nil {
		if err := opts.Verify(ctx, repo.Reference.Registry+"/"+repo.Reference.Repository+"@"+rev.Digest); err != nil {
			return Result{Revision: rev}, fmt.Errorf("%s: %w", obj, err)
		}
	}
	return storeLayer(ctx, store, obj, repo, repoURL, rev, opts)
}

// FetchRevision stores obj's artifact for exactly revision, a revision as
// Fetch returned it ("<tag>@sha256:<hex>" or "sha256:<hex>"): it pulls the
// manifest of that digest, whatever the tag points to now, and stores the
// selected layer as Fetch does, so the same manifest, layer selector and
// opts.Ignore give the same digest. The artifact's revision is the given
// string. opts.Ref and opts.LastRevision are not used.
func FetchRevision(ctx context.Context, store *source.Store, obj source.Object, repoURL, revision string, opts Options) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	rev, err := parseRevision(revision)
	if err != nil {
		return Result{}, fmt.Errorf("%s: oci %s: %w", obj, repoURL, err)
	}
	repo, release, err := repository(repoURL, opts.Registry)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	defer release()
	return storeLayer(ctx, store, obj, repo, repoURL, rev, opts)
}

// ReadRevision returns the content of the selected layer of the manifest
// that revision pins ("<tag>@sha256:<hex>" or "sha256:<hex>", as Resolve
// and Fetch return it), verified against its digest, for content a caller
// keeps in memory, such as a Helm chart. A layer larger than opts.MaxSize
// is refused before it is pulled (source.ErrTooLarge), as by every verb
// here. opts.Ref,
// opts.LastRevision, opts.Ignore and opts.Layer.Operation are not used.
func ReadRevision(ctx context.Context, repoURL, revision string, opts Options) ([]byte, Result, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	rev, err := parseRevision(revision)
	if err != nil {
		return nil, Result{}, fmt.Errorf("oci %s: %w", repoURL, err)
	}
	repo, release, err := repository(repoURL, opts.Registry)
	if err != nil {
		return nil, Result{}, err
	}
	defer release()
	var b []byte
	res, err := pull(ctx, repo, repoURL, rev, opts.Layer, opts.maxSize(), func(r io.Reader) error {
		b, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		return nil, Result{}, err
	}
	return b, res, nil
}

// storeLayer pulls the selected layer of the manifest rev pins and stores it as
// obj's artifact, with the manifest annotations as metadata.
func storeLayer(ctx context.Context, store *source.Store, obj source.Object, repo *remote.Repository, repoURL string, rev Revision, opts Options) (Result, error) {
	var a source.Artifact
	var res Result
	var err error
	if opts.Layer.Operation == Copy {
		res, err = pull(ctx, repo, repoURL, rev, opts.Layer, opts.maxSize(), func(r io.Reader) error {
			a, err = store.Put(ctx, obj, rev.String, r)
			return err
		})
	} else {
		a, res, err = pullArchive(ctx, store, obj, repo, repoURL, rev, opts)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", obj, err)
	}
	a.Metadata = res.Annotations
	res.Artifact = a
	return res, nil
}

func pullArchive(ctx context.Context, store *source.Store, obj source.Object, repo *remote.Repository, repoURL string, rev Revision, opts Options) (source.Artifact, Result, error) {
	tmp, err := os.MkdirTemp("", "cozy-oci-")
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	defer os.RemoveAll(tmp)
	res, err := pull(ctx, repo, repoURL, rev, opts.Layer, opts.maxSize(), func(r io.Reader) error {
		return source.Extract(ctx, r, tmp, source.ExtractOptions{MaxSize: opts.MaxSize})
	})
	if err != nil {
		return source.Artifact{}, Result{}, err
	}
	a, err := store.Archive(ctx, obj, tmp, rev.String, source.ArchiveOptions{Ignore: opts.Ignore})
	return a, res, err
}

// maxManifestSize bounds a manifest read into memory: oras-go's bound on
// the metadata it reads (MaxMetadataBytes' default), which its
// FetchReference does not apply to manifests.
const maxManifestSize = 4 << 20

// pull reads the manifest pinned to rev.Digest, verifying it, selects the
// layer and hands its content to sink. It refuses a layer whose
// descriptor is larger than maxLayer (Options.MaxSize; negative: no
// limit) before pulling it, and reads no more than the descriptor's size.
// The sink sees a reader that fails instead of ending when the layer does
// not match its digest, and pull drains what the sink left unread so that
// the check always runs.
func pull(ctx context.Context, repo *remote.Repository, repoURL string, rev Revision, sel LayerSelector, maxLayer int64, sink func(io.Reader) error) (Result, error) {
	mdesc, rc, err := repo.FetchReference(ctx, rev.Digest)
	if err != nil {
		return Result{}, fetcher.Classify(ctx, repoURL, err)
	}
	defer rc.Close()
	if mdesc.Size > maxManifestSize {
		return Result{}, fmt.Errorf("oci %s: manifest %s: %w: %d bytes, more than the limit of %d bytes for a manifest",
			redact.String(repoURL), rev.Digest, source.ErrTooLarge, mdesc.Size, maxManifestSize)
	}
	if mdesc.Digest.String() != rev.Digest {
		return Result{}, fmt.Errorf("oci %s: %w: manifest is %s, want %s", repoURL, source.ErrDigestMismatch, mdesc.Digest, rev.Digest)
	}
	raw, err := content.ReadAll(rc, mdesc)
	if err != nil {
		return Result{}, fetcher.Classify(ctx, repoURL, fmt.Errorf("manifest %s: %w", rev.Digest, err))
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Result{}, fmt.Errorf("oci %s: manifest %s: %w", repoURL, rev.Digest, err)
	}
	layer, err := selectLayer(m, sel)
	if err != nil {
		return Result{}, fmt.Errorf("oci %s: manifest %s: %w", repoURL, rev.Digest, err)
	}
	if maxLayer >= 0 && layer.Size > maxLayer {
		return Result{}, fmt.Errorf("oci %s: layer %s: %w: the manifest gives %d bytes, more than the limit of %d bytes (MaxSize)",
			redact.String(repoURL), layer.Digest, source.ErrTooLarge, layer.Size, maxLayer)
	}
	blob, err := repo.Fetch(ctx, layer)
	if err != nil {
		return Result{}, fetcher.Classify(ctx, repoURL, err)
	}
	defer blob.Close()
	// One byte past the size is enough for the verifier to see more.
	vr := &verifier{r: io.LimitReader(blob, layer.Size+1), desc: layer, h: sha256.New()}
	err = sink(vr)
	// Drain even after a failed sink: a corrupt stream is reported as the
	// digest mismatch it is, not as the gzip error it caused.
	if _, derr := io.Copy(io.Discard, vr); errors.Is(derr, source.ErrDigestMismatch) {
		err = derr
	} else if err == nil {
		err = derr
	}
	if err != nil {
		return Result{}, fetcher.Classify(ctx, repoURL, fmt.Errorf("layer %s: %w", layer.Digest, err))
	}
	return Result{Revision: rev, Layer: layer, Annotations: m.Annotations}, nil
}

func selectLayer(m ocispec.Manifest, sel LayerSelector) (ocispec.Descriptor, error) {
	if m.MediaType == ocispec.MediaTypeImageIndex || m.MediaType == "application/vnd.docker.distribution.manifest.list.v2+json" {
		return ocispec.Descriptor{}, fmt.Errorf("%w: image indexes are not supported", ErrLayerNotFound)
	}
	for _, l := range m.Layers {
		if sel.MediaType == "" || l.MediaType == sel.MediaType {
			return l, nil
		}
	}
	return ocispec.Descriptor{}, fmt.Errorf("%w: media type %q", ErrLayerNotFound, sel.MediaType)
}

// verifier passes content through and, at its end, returns
// source.ErrDigestMismatch instead of io.EOF when size or digest differ.
type verifier struct {
	r    io.Reader
	desc ocispec.Descriptor
	h    hash.Hash
	n    int64
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.desc.Size {
		return n, fmt.Errorf("%w: more than %d bytes", source.ErrDigestMismatch, v.desc.Size)
	}
	if err == io.EOF {
		got := "sha256:" + hex.EncodeToString(v.h.Sum(nil))
		if v.n != v.desc.Size || got != v.desc.Digest.String() {
			return n, fmt.Errorf("%w: got %s (%d bytes), want %s (%d bytes)", source.ErrDigestMismatch, got, v.n, v.desc.Digest, v.desc.Size)
		}
	}
	return n, err
}

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image.
const (
	// BinaryPath is where the binary sits; the static pod runs it.
	BinaryPath = "/cozy-aio"
	// CACertsPath is where Go's crypto/x509 looks for roots on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// OCI label keys the image carries (image-spec annotations.md).
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelTitle    = "org.opencontainers.image.title"
	LabelLicenses = "org.opencontainers.image.licenses"
)

// DefaultSource is the repository the image is built from.
const DefaultSource = "https://github.com/cozystack/cozy-aio"

// Options configures Index.
type Options struct {
	// Binaries are the per-platform binaries; one image each. Required.
	Binaries []Binary
	// Version, Revision and Source become OCI labels. Source defaults to
	// DefaultSource; empty Version and Revision are left out.
	Version, Revision, Source string
	// Created is the images' creation time and the files' mtime. Default:
	// the Unix epoch, so that no build clock goes into the digests.
	Created time.Time
	// CACerts is a PEM bundle of root certificates copied to CACertsPath,
	// for HTTPS sources (the base is empty). Default: none.
	CACerts []byte
}

// Index builds an OCI image index with one image per binary: a single
// layer holding the binary, /tmp and the CA bundle, the entrypoint
// `cozy-aio run` and the OCI labels.
func Index(opts Options) (v1.ImageIndex, error) {
	if len(opts.Binaries) == 0 {
		return nil, fmt.Errorf("image: no binaries")
	}
	if opts.Source == "" {
		opts.Source = DefaultSource
	}
	if opts.Created.IsZero() {
		opts.Created = time.Unix(0, 0)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range opts.Binaries {
		img, err := platformImage(b, opts)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", b.Platform, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: b.Platform.OS, Architecture: b.Platform.Arch},
			},
		})
	}
	return idx, nil
}

func labels(opts Options) map[string]string {
	l := map[string]string{LabelSource: opts.Source, LabelTitle: "cozy-aio", LabelLicenses: "Apache-2.0"}
	if opts.Version != "" {
		l[LabelVersion] = opts.Version
	}
	if opts.Revision != "" {
		l[LabelRevision] = opts.Revision
	}
	return l
}

func platformImage(b Binary, opts Options) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(bin, opts.CACerts, opts.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: b.Platform.Arch,
		OS:           b.Platform.OS,
		Created:      v1.Time{Time: opts.Created.UTC()},
		Config: v1.Config{
			Entrypoint: []string{BinaryPath, "run"},
			Env:        []string{"PATH=/"},
			WorkingDir: "/",
			Labels:     labels(opts),
		},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "cozy-aio hack/image", Created: v1.Time{Time: opts.Created.UTC()}},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: opts.Created.UTC()})
}

// rootfs is the one layer: /tmp for the engine's scratch directories, the
// CA bundle when given, and the binary.
func rootfs(bin, caCerts []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: mtime})
	}
	file := func(name string, mode int64, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := dir("tmp/", 0o1777); err != nil {
		return nil, err
	}
	if len(caCerts) > 0 {
		for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/"} {
			if err := dir(d, 0o755); err != nil {
				return nil, err
			}
		}
		if err := file(CACertsPath[1:], 0o644, caCerts); err != nil {
			return nil, err
		}
	}
	if err := file(BinaryPath[1:], 0o755, bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PushOptions configures Push.
type PushOptions struct {
	// Insecure allows plain HTTP to the registry. Default: HTTPS, except
	// for hosts go-containerregistry treats as local.
	Insecure bool
}

// Push pushes the index, its images and their blobs to ref, with the
// credentials of the docker config (as `docker push` and crane), else
// anonymously.
func Push(ctx context.Context, idx v1.ImageIndex, ref string, opts PushOptions) error {
	var nopts []name.Option
	if opts.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return err
	}
	err = remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// WriteLayout writes an OCI image layout in dir, replacing what was there:
// its index.json points at the image index, named refName
// (org.opencontainers.image.ref.name) when not empty, as `skopeo copy
// oci:DIR:REF` and `crane push` read it.
func WriteLayout(dir string, idx v1.ImageIndex, refName string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var lopts []layout.Option
	if refName != "" {
		lopts = append(lopts, layout.WithAnnotations(map[string]string{ocispecRefName: refName}))
	}
	return p.AppendIndex(idx, lopts...)
}

// ocispecRefName is the annotation naming a manifest in an image layout.
const ocispecRefName = "org.opencontainers.image.ref.name"

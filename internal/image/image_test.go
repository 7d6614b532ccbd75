package image_test

import (
	"archive/tar"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cozystack/cozy-aio/internal/image"
	"github.com/cozystack/cozy-aio/internal/testenv"
)

const testVersion = "v0.0.0-imagetest"

// TestImagePushPullRun builds the real binary for both platforms, pushes
// the index to an in-process registry, pulls it back, checks the index,
// each platform's config and layer, and runs the amd64 binary taken from
// the pulled layer.
func TestImagePushPullRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cozy-aio for two platforms")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bins, err := image.BuildBinaries(ctx, image.BuildOptions{Version: testVersion, ModuleDir: "../..", OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\nnot a real root\n-----END CERTIFICATE-----\n")
	idx, err := image.Index(image.Options{Binaries: bins, Version: testVersion, Revision: "0123abc", CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ref := reg.Host() + "/cozystack/cozy-aio:" + testVersion
	if err := image.Push(ctx, idx, ref, image.PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}

	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(r, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	im, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("index: media type %s with %d manifests, want an OCI index of 2", im.MediaType, len(im.Manifests))
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := pulled.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, *d.Platform, ca)
	}
	slices.Sort(platforms)
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("platforms %v, want %v", platforms, want)
	}

	// The OCI layout names the same index by its version.
	dir := filepath.Join(t.TempDir(), "layout")
	if err := image.WriteLayout(dir, idx, testVersion); err != nil {
		t.Fatal(err)
	}
	fromDisk, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	outer, _ := fromDisk.IndexManifest()
	pushedDigest, _ := pulled.Digest()
	if len(outer.Manifests) != 1 || outer.Manifests[0].Digest != pushedDigest ||
		outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("layout's index.json points at %+v, want the pushed index %s", outer.Manifests, pushedDigest)
	}
}

func checkImage(t *testing.T, img v1.Image, p v1.Platform, ca []byte) {
	t.Helper()
	mt, _ := img.MediaType()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if mt != types.OCIManifestSchema1 || cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Fatalf("%s: manifest %s, config for %s/%s", p.Architecture, mt, cf.OS, cf.Architecture)
	}
	if want := []string{"/cozy-aio", "run"}; !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("%s: entrypoint %q, want %q", p.Architecture, cf.Config.Entrypoint, want)
	}
	for k, want := range map[string]string{image.LabelVersion: testVersion, image.LabelRevision: "0123abc", image.LabelSource: image.DefaultSource} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s = %q, want %q", p.Architecture, k, got, want)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1 on an empty base", p.Architecture, len(layers), err)
	}
	files := readLayer(t, layers[0])
	if h := files["tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("%s: /tmp missing or not 1777: %+v", p.Architecture, h)
	}
	if h := files["etc/ssl/certs/ca-certificates.crt"]; h == nil || h.Size != int64(len(ca)) {
		t.Errorf("%s: CA bundle missing: %+v", p.Architecture, h)
	}
	bin := files["cozy-aio"]
	if bin == nil || bin.Mode&0o111 == 0 {
		t.Fatalf("%s: no executable /cozy-aio in the layer", p.Architecture)
	}
	path := extractBinary(t, layers[0])
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: /cozy-aio is not ELF: %v", p.Architecture, err)
	}
	defer f.Close()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	if f.Machine != wantMachine {
		t.Fatalf("%s: binary is for %s", p.Architecture, f.Machine)
	}
	if f.Section(".interp") != nil {
		t.Errorf("%s: binary is dynamically linked; an empty base has no loader", p.Architecture)
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: binary keeps its symbol table; want -s -w", p.Architecture)
	}
	if p.Architecture == runtime.GOARCH && runtime.GOOS == "linux" {
		out, err := exec.Command(path, "version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != testVersion {
			t.Fatalf("pulled binary `version`: %q %v, want %s", out, err, testVersion)
		}
	} else if p.Architecture == "amd64" {
		t.Logf("not running the amd64 binary on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
}

func readLayer(t *testing.T, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
}

func extractBinary(t *testing.T, l v1.Layer) string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no cozy-aio in the layer: %v", err)
		}
		if h.Name != "cozy-aio" {
			continue
		}
		path := filepath.Join(t.TempDir(), "cozy-aio")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

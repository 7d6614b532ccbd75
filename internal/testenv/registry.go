package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/distribution/v3/configuration"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd" // htpasswd access controller
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // in-memory storage driver
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/yaml"
)

// Media types of the artifacts that Flux and Helm push.
const (
	FluxConfigMediaType  = "application/vnd.cncf.flux.config.v1+json"
	FluxContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
	HelmConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	HelmChartMediaType   = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// RegistryOptions configures StartRegistry. The zero value serves without auth.
type RegistryOptions struct {
	// Username and Password switch htpasswd basic auth on when Username is set.
	Username, Password string
	// TLS serves HTTPS with a certificate for 127.0.0.1 that CACert
	// returns, as a registry such as ghcr.io does; clients must trust it.
	TLS bool
}

// Registry is a real OCI registry (distribution/v3) running in this process
// on 127.0.0.1 with in-memory storage, over plain HTTP.
type Registry struct {
	srv        *httptest.Server
	dir        string
	user, pass string
}

// StartRegistry starts a registry.
func StartRegistry(opts RegistryOptions) (*Registry, error) {
	dir, err := os.MkdirTemp("", "cozy-registry-")
	if err != nil {
		return nil, err
	}
	cfg := &configuration.Configuration{}
	cfg.Version = configuration.CurrentVersion
	cfg.Storage = configuration.Storage{
		"inmemory": configuration.Parameters{},
		"delete":   configuration.Parameters{"enabled": true},
	}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.HTTP.Secret = "cozy-aio-test-registry"
	logrus.SetOutput(io.Discard)
	if opts.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(path, []byte(opts.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "cozy-aio-test", "path": path}}
	}
	app := handlers.NewApp(context.Background(), cfg)
	srv := httptest.NewUnstartedServer(app)
	if opts.TLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return &Registry{srv: srv, dir: dir, user: opts.Username, pass: opts.Password}, nil
}

// Close stops the registry.
func (r *Registry) Close() {
	r.srv.Close()
	os.RemoveAll(r.dir)
}

// Host returns host:port of the registry, for references like host/repo:tag.
func (r *Registry) Host() string {
	return strings.TrimPrefix(strings.TrimPrefix(r.srv.URL, "http://"), "https://")
}

// CACert returns the PEM certificate a TLS registry serves with, nil
// without TLS.
func (r *Registry) CACert() []byte {
	if r.srv.TLS == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

// DockerConfigJSON returns a docker config.json with the registry's
// credentials, as a kubernetes.io/dockerconfigjson Secret holds it.
func (r *Registry) DockerConfigJSON() []byte {
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{
		r.Host(): map[string]string{"username": r.user, "password": r.pass},
	}})
	return b
}

// Repository returns an oras-go client for a repository of this registry,
// logged in when the registry has auth.
func (r *Registry) Repository(name string) (*remote.Repository, error) {
	repo, err := remote.NewRepository(r.Host() + "/" + name)
	if err != nil {
		return nil, err
	}
	repo.PlainHTTP = r.srv.TLS == nil
	hc := http.DefaultClient
	if r.srv.TLS != nil {
		hc = r.srv.Client()
	}
	client := &auth.Client{Client: hc, Cache: auth.NewCache()}
	if r.user != "" {
		client.Credential = auth.StaticCredential(r.Host(), auth.Credential{Username: r.user, Password: r.pass})
	}
	repo.Client = client
	return repo, nil
}

// PushArtifact pushes files (path → content) as a Flux OCI artifact: one
// tar.gz layer of the Flux content media type. It returns the manifest.
func (r *Registry) PushArtifact(ctx context.Context, repo, tag string, files map[string]string, annotations map[string]string) (ocispec.Descriptor, error) {
	layer, err := TarGz(files, "")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return r.push(ctx, repo, tag, FluxConfigMediaType, []byte("{}"), FluxContentMediaType, layer, annotations)
}

// PushChart pushes a Helm chart given as files (path → content, with
// Chart.yaml at the top) as an OCI chart, tagged with the chart version,
// as `helm push` does. It returns the manifest.
func (r *Registry) PushChart(ctx context.Context, repo string, files map[string]string) (ocispec.Descriptor, error) {
	return r.PushChartAnnotated(ctx, repo, files, nil)
}

// PushChartAnnotated is PushChart with manifest annotations: with
// org.opencontainers.image.created among them, the same files give the
// same manifest digest on every push (oras stamps the time otherwise).
func (r *Registry) PushChartAnnotated(ctx context.Context, repo string, files map[string]string, annotations map[string]string) (ocispec.Descriptor, error) {
	var meta struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	chartYAML, ok := files["Chart.yaml"]
	if !ok {
		return ocispec.Descriptor{}, fmt.Errorf("chart for %s has no Chart.yaml", repo)
	}
	cfg, err := yaml.YAMLToJSON([]byte(chartYAML))
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("Chart.yaml: %w", err)
	}
	if err := json.Unmarshal(cfg, &meta); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("Chart.yaml: %w", err)
	}
	layer, err := TarGz(files, meta.Name+"/")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	tag := strings.ReplaceAll(meta.Version, "+", "_")
	return r.push(ctx, repo, tag, HelmConfigMediaType, cfg, HelmChartMediaType, layer, annotations)
}

func (r *Registry) push(ctx context.Context, repo, tag, configType string, config []byte, layerType string, layer []byte, annotations map[string]string) (ocispec.Descriptor, error) {
	store := memory.New()
	configDesc := content.NewDescriptorFromBytes(configType, config)
	layerDesc := content.NewDescriptorFromBytes(layerType, layer)
	for _, b := range []struct {
		d ocispec.Descriptor
		c []byte
	}{{configDesc, config}, {layerDesc, layer}} {
		if err := store.Push(ctx, b.d, bytes.NewReader(b.c)); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	manifest, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor:    &configDesc,
		Layers:              []ocispec.Descriptor{layerDesc},
		ManifestAnnotations: annotations,
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := store.Tag(ctx, manifest, tag); err != nil {
		return ocispec.Descriptor{}, err
	}
	dst, err := r.Repository(repo)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := oras.Copy(ctx, store, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing %s/%s:%s: %w", r.Host(), repo, tag, err)
	}
	return manifest, nil
}

// TarGz packs files (path → content) into a gzipped tarball, each path
// under prefix, in sorted order with zero times.
func TarGz(files map[string]string, prefix string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, p := range sortedKeys(files) {
		hdr := &tar.Header{Name: prefix + p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, files[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CopyManifest copies the manifest tagged fromTag in repository from,
// with the blobs it references, to toTag in repository to.
func (r *Registry) CopyManifest(ctx context.Context, from, fromTag, to, toTag string) error {
	src, err := r.Repository(from)
	if err != nil {
		return err
	}
	dst, err := r.Repository(to)
	if err != nil {
		return err
	}
	_, err = oras.Copy(ctx, src, fromTag, dst, toTag, oras.DefaultCopyOptions)
	return err
}

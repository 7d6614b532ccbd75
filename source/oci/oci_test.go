package oci_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/oci"
)

type fixture struct {
	reg                     *testenv.Registry
	url                     string
	v100, v110, v200, chart ocispec.Descriptor
	opts                    oci.Options
}

func setup(t *testing.T) *fixture {
	t.Helper()
	reg, err := testenv.StartRegistry(testenv.RegistryOptions{Username: "flux", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	ctx := context.Background()
	f := &fixture{reg: reg, url: "oci://" + reg.Host() + "/manifests"}
	push := func(tag, version string) ocispec.Descriptor {
		d, err := reg.PushArtifact(ctx, "manifests", tag, map[string]string{"deploy/app.yaml": "version: " + version + "\n"},
			map[string]string{"org.opencontainers.image.revision": "main@sha1:" + strings.Repeat("a", 40)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	f.v100 = push("v1.0.0", "1.0.0")
	f.v110 = push("v1.1.0", "1.1.0")
	f.v200 = push("v2.0.0", "2.0.0")
	push("latest", "latest")
	push("not-semver", "x")
	if f.chart, err = reg.PushChart(ctx, "charts/podinfo", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: podinfo\nversion: 6.5.0+build.1\n", "values.yaml": "replicas: 1\n",
	}); err != nil {
		t.Fatal(err)
	}
	f.opts = oci.Options{Registry: oci.Registry{DockerConfigJSON: reg.DockerConfigJSON(), PlainHTTP: true}}
	return f
}

func fileOf(t *testing.T, st *source.Store, a source.Artifact, p string) string {
	t.Helper()
	dir := t.TempDir()
	if err := st.Extract(context.Background(), a, dir, source.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, p))
	return string(b)
}

var obj = source.Object{Kind: "OCIRepository", Namespace: "ns", Name: "app"}

func TestFetchRefKinds(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	cases := []struct {
		name    string
		ref     oci.Ref
		rev     string
		content string
	}{
		{"tag", oci.Ref{Tag: "v1.0.0"}, "v1.0.0@" + f.v100.Digest.String(), "version: 1.0.0\n"},
		{"default latest", oci.Ref{}, "latest@", "version: latest\n"},
		{"semver", oci.Ref{SemVer: ">=1.0.0 <2.0.0"}, "v1.1.0@" + f.v110.Digest.String(), "version: 1.1.0\n"},
		{"semver wins over tag", oci.Ref{SemVer: "2.x", Tag: "v1.0.0"}, "v2.0.0@" + f.v200.Digest.String(), "version: 2.0.0\n"},
		{"semver filter", oci.Ref{SemVer: "*", SemVerFilter: `^v1\.`}, "v1.1.0@" + f.v110.Digest.String(), "version: 1.1.0\n"},
		{"digest", oci.Ref{Digest: f.v110.Digest.String(), Tag: "v2.0.0"}, f.v110.Digest.String(), "version: 1.1.0\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := f.opts
			opts.Ref = tc.ref
			res, err := oci.Fetch(context.Background(), st, obj, f.url, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(res.Revision.String, tc.rev) || res.Artifact.Revision != res.Revision.String {
				t.Fatalf("revision %q, want %q", res.Revision.String, tc.rev)
			}
			if got := fileOf(t, st, res.Artifact, "deploy/app.yaml"); got != tc.content {
				t.Fatalf("content %q, want %q", got, tc.content)
			}
			if res.Artifact.Metadata["org.opencontainers.image.revision"] == "" {
				t.Fatal("manifest annotations not kept")
			}
		})
	}
}

func TestFetchLayerSelection(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	url := "oci://" + f.reg.Host() + "/charts/podinfo"
	opts := f.opts
	opts.Ref = oci.Ref{SemVer: "6.x"}
	opts.Layer = oci.LayerSelector{MediaType: testenv.HelmChartMediaType, Operation: oci.Copy}
	res, err := oci.Fetch(context.Background(), st, obj, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision.String != "6.5.0_build.1@"+f.chart.Digest.String() {
		t.Fatalf("revision %q", res.Revision.String)
	}
	// Copy stores the blob unchanged: the artifact digest is the layer digest.
	if res.Artifact.Digest != res.Layer.Digest.String() {
		t.Fatalf("artifact %s, layer %s", res.Artifact.Digest, res.Layer.Digest)
	}
	if got := fileOf(t, st, res.Artifact, "podinfo/values.yaml"); got != "replicas: 1\n" {
		t.Fatalf("values.yaml %q", got)
	}
	opts.Layer.Operation = oci.Extract
	res, err = oci.Fetch(context.Background(), st, obj, url, opts)
	if err != nil || fileOf(t, st, res.Artifact, "podinfo/Chart.yaml") == "" {
		t.Fatalf("extract: %v", err)
	}
	dir := t.TempDir()
	if _, err := oci.Pull(context.Background(), url, dir, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "podinfo", "values.yaml")); err != nil {
		t.Fatal(err)
	}
	opts.Layer.MediaType = "application/vnd.example.none"
	if _, err := oci.Fetch(context.Background(), st, obj, url, opts); !errors.Is(err, oci.ErrLayerNotFound) {
		t.Fatalf("got %v, want ErrLayerNotFound", err)
	}
}

func TestFetchUnchanged(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	opts := f.opts
	opts.Ref = oci.Ref{Tag: "v1.0.0"}
	opts.LastRevision = "v1.0.0@" + f.v100.Digest.String()
	res, err := oci.Fetch(context.Background(), st, obj, f.url, opts)
	if err != nil || !res.Unchanged || res.Artifact.Path != "" {
		t.Fatalf("%+v %v", res, err)
	}
	opts.LastRevision = "v1.0.0@sha256:" + strings.Repeat("0", 64)
	if res, err = oci.Fetch(context.Background(), st, obj, f.url, opts); err != nil || res.Unchanged {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestFetchErrors(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	ctx := context.Background()
	if _, err := f.reg.PushArtifact(ctx, "evil", "v1", map[string]string{"../../escape": "x"}, nil); err != nil {
		t.Fatal(err)
	}
	wrong := f.opts
	wrong.DockerConfigJSON = []byte(`{"auths":{"` + f.reg.Host() + `":{"auth":"` + "Zmx1eDpub3Bl" + `"}}}`) // flux:nope
	anon := oci.Options{Registry: oci.Registry{PlainHTTP: true}}
	with := func(o oci.Options, ref oci.Ref) oci.Options { o.Ref = ref; return o }
	cases := []struct {
		name string
		url  string
		opts oci.Options
		want error
	}{
		{"wrong credentials", f.url, with(wrong, oci.Ref{Tag: "v1.0.0"}), source.ErrAuth},
		{"no credentials", f.url, with(anon, oci.Ref{Tag: "v1.0.0"}), source.ErrAuth},
		{"malformed docker config", f.url, oci.Options{Registry: oci.Registry{DockerConfigJSON: []byte("{"), PlainHTTP: true}}, source.ErrAuth},
		{"missing tag", f.url, with(f.opts, oci.Ref{Tag: "v9"}), source.ErrRefNotFound},
		{"missing digest", f.url, with(f.opts, oci.Ref{Digest: "sha256:" + strings.Repeat("1", 64)}), source.ErrRefNotFound},
		{"malformed digest", f.url, with(f.opts, oci.Ref{Digest: "sha256:xyz"}), source.ErrRefNotFound},
		{"missing repository", "oci://" + f.reg.Host() + "/nope", with(f.opts, oci.Ref{Tag: "v1"}), source.ErrRefNotFound},
		{"empty semver match", f.url, with(f.opts, oci.Ref{SemVer: ">=3.0.0"}), source.ErrNoSemverMatch},
		{"semver filter excludes every match", f.url, with(f.opts, oci.Ref{SemVer: "*", SemVerFilter: "-rc"}), source.ErrNoSemverMatch},
		{"semver filter not a regular expression", f.url, with(f.opts, oci.Ref{SemVer: "*", SemVerFilter: "["}), source.ErrNoSemverMatch},
		{"unreachable host", "oci://127.0.0.1:1/manifests", with(f.opts, oci.Ref{Tag: "v1"}), source.ErrUnreachable},
		{"https to a plain HTTP registry", f.url, oci.Options{Registry: oci.Registry{DockerConfigJSON: f.opts.DockerConfigJSON}}, source.ErrUnreachable},
		{"tar-slip layer", "oci://" + f.reg.Host() + "/evil", with(f.opts, oci.Ref{Tag: "v1"}), source.ErrPathTraversal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oci.Fetch(ctx, st, obj, tc.url, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// tamperingProxy stands between the client and the registry and flips a
// byte of every response body whose path contains part, keeping headers
// (Docker-Content-Digest, Content-Length) as the registry sent them.
func tamperingProxy(t *testing.T, reg *testenv.Registry, part string) string {
	target, _ := url.Parse("http://" + reg.Host())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet || !strings.Contains(resp.Request.URL.Path, part) || resp.StatusCode != 200 {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if len(b) > 0 {
			b[len(b)/2] ^= 0x01
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestFetchTamperedDigest(t *testing.T) {
	f := setup(t)
	for _, part := range []string{"/manifests/", "/blobs/"} {
		for _, op := range []oci.Operation{oci.Extract, oci.Copy} {
			t.Run(part+string(op), func(t *testing.T) {
				host := tamperingProxy(t, f.reg, part)
				st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
				opts := f.opts
				opts.DockerConfigJSON = []byte(`{"auths":{"` + host + `":{"username":"flux","password":"s3cret"}}}`)
				opts.Ref = oci.Ref{Tag: "v1.0.0"}
				opts.Layer.Operation = op
				_, err := oci.Fetch(context.Background(), st, obj, "oci://"+host+"/manifests", opts)
				if !errors.Is(err, source.ErrDigestMismatch) {
					t.Fatalf("got %v, want ErrDigestMismatch", err)
				}
				if entries, _ := os.ReadDir(filepath.Join(st.Root(), "ocirepository", "ns", "app")); len(entries) != 0 {
					t.Fatalf("a tampered artifact reached the store: %v", entries)
				}
			})
		}
	}
}

// TestFetchTLS reaches the registry through a TLS front with a self-signed
// certificate: refused by default, accepted with the caller's TLS config.
func TestFetchTLS(t *testing.T) {
	f := setup(t)
	target, _ := url.Parse("http://" + f.reg.Host())
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	defer front.Close()
	host := strings.TrimPrefix(front.URL, "https://")
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	opts := oci.Options{
		Registry: oci.Registry{DockerConfigJSON: []byte(`{"auths":{"` + host + `":{"username":"flux","password":"s3cret"}}}`)},
		Ref:      oci.Ref{Tag: "v1.0.0"},
	}
	if _, err := oci.Fetch(context.Background(), st, obj, "oci://"+host+"/manifests", opts); !errors.Is(err, source.ErrUnreachable) {
		t.Fatalf("self-signed without TLS config: %v", err)
	}
	opts.TLSConfig = front.Client().Transport.(*http.Transport).TLSClientConfig
	res, err := oci.Fetch(context.Background(), st, obj, "oci://"+host+"/manifests", opts)
	if err != nil || res.Revision.String != "v1.0.0@"+f.v100.Digest.String() {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestFetchRevisionRebuildsTheSameArtifact rebuilds, in a fresh store, what
// Fetch stored, after the tag has moved to other content.
func TestFetchRevisionRebuildsTheSameArtifact(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	chartURL := "oci://" + f.reg.Host() + "/charts/podinfo"
	cases := []struct {
		name string
		url  string
		ref  oci.Ref
		sel  oci.LayerSelector
		ign  []string
	}{
		{"tag, extracted", f.url, oci.Ref{Tag: "v1.0.0"}, oci.LayerSelector{}, nil},
		{"tag, extracted with ignore rules", f.url, oci.Ref{Tag: "v1.0.0"}, oci.LayerSelector{}, []string{"*.md"}},
		{"digest", f.url, oci.Ref{Digest: f.v110.Digest.String()}, oci.LayerSelector{}, nil},
		{"chart, copied", chartURL, oci.Ref{SemVer: "6.x"}, oci.LayerSelector{MediaType: testenv.HelmChartMediaType, Operation: oci.Copy}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := f.opts
			opts.Ref, opts.Layer, opts.Ignore = tc.ref, tc.sel, tc.ign
			built, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
			want, err := oci.Fetch(ctx, built, obj, tc.url, opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.Ref = oci.Ref{Tag: "v2.0.0"} // not used
			fresh, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
			got, err := oci.FetchRevision(ctx, fresh, obj, tc.url, want.Artifact.Revision, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got.Artifact.Digest != want.Artifact.Digest || got.Artifact.Revision != want.Artifact.Revision ||
				got.Artifact.Metadata["org.opencontainers.image.revision"] != want.Artifact.Metadata["org.opencontainers.image.revision"] {
				t.Fatalf("rebuilt %+v, want %+v", got.Artifact, want.Artifact)
			}
		})
	}
	// The tag moves: the revision still names the old manifest.
	opts := f.opts
	opts.Ref = oci.Ref{Tag: "v1.0.0"}
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	old, err := oci.Fetch(ctx, st, obj, f.url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.PushArtifact(ctx, "manifests", "v1.0.0", map[string]string{"deploy/app.yaml": "version: moved\n"}, nil); err != nil {
		t.Fatal(err)
	}
	fresh, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	got, err := oci.FetchRevision(ctx, fresh, obj, f.url, old.Artifact.Revision, opts)
	if err != nil || got.Artifact.Digest != old.Artifact.Digest || fileOf(t, fresh, got.Artifact, "deploy/app.yaml") != "version: 1.0.0\n" {
		t.Fatalf("after the tag moved: %+v %v", got.Artifact, err)
	}
}

func TestFetchRevisionErrors(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	for _, rev := range []string{"v1.0.0", "@" + f.v100.Digest.String(), "v1.0.0@sha256:xyz", "sha256:" + strings.Repeat("1", 64)} {
		if _, err := oci.FetchRevision(context.Background(), st, obj, f.url, rev, f.opts); !errors.Is(err, source.ErrRefNotFound) {
			t.Errorf("revision %q: got %v, want ErrRefNotFound", rev, err)
		}
	}
}

func TestReadRevision(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	chartURL := "oci://" + f.reg.Host() + "/charts/podinfo"
	opts := f.opts
	opts.Ref = oci.Ref{Tag: "6.5.0_build.1"} // Helm writes a SemVer "+" as "_"
	opts.Layer = oci.LayerSelector{MediaType: testenv.HelmChartMediaType}
	rev, err := oci.Resolve(ctx, chartURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, res, err := oci.ReadRevision(ctx, chartURL, rev.String, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision.Digest != f.chart.Digest.String() || res.Layer.MediaType != testenv.HelmChartMediaType ||
		int64(len(b)) != res.Layer.Size || digest.FromBytes(b) != res.Layer.Digest {
		t.Fatalf("read %d bytes, %+v", len(b), res)
	}
	// Basic credentials for the repository's registry win over the docker
	// config.
	basic := opts
	basic.DockerConfigJSON = []byte(`{"auths":{"` + f.reg.Host() + `":{"username":"flux","password":"nope"}}}`)
	basic.Username, basic.Password = "flux", "s3cret"
	if _, _, err := oci.ReadRevision(ctx, chartURL, rev.String, basic); err != nil {
		t.Fatalf("basic credentials: %v", err)
	}
	basic.Password = "nope"
	if _, _, err := oci.ReadRevision(ctx, chartURL, rev.String, basic); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("wrong basic credentials: got %v, want ErrAuth", err)
	}

	small := opts
	small.MaxSize = res.Layer.Size - 1
	if _, _, err := oci.ReadRevision(ctx, chartURL, rev.String, small); !errors.Is(err, source.ErrTooLarge) {
		t.Fatalf("over MaxSize: got %v, want ErrTooLarge", err)
	}
	other := opts
	other.Layer.MediaType = "application/vnd.example.none"
	if _, _, err := oci.ReadRevision(ctx, chartURL, rev.String, other); !errors.Is(err, oci.ErrLayerNotFound) {
		t.Fatalf("no such layer: got %v, want ErrLayerNotFound", err)
	}
	host := tamperingProxy(t, f.reg, "/blobs/")
	tampered := opts
	tampered.DockerConfigJSON = []byte(`{"auths":{"` + host + `":{"username":"flux","password":"s3cret"}}}`)
	if _, _, err := oci.ReadRevision(ctx, "oci://"+host+"/charts/podinfo", rev.String, tampered); !errors.Is(err, source.ErrDigestMismatch) {
		t.Fatalf("tampered layer: got %v, want ErrDigestMismatch", err)
	}
	if _, _, err := oci.ReadRevision(ctx, chartURL, "6.5.0", opts); !errors.Is(err, source.ErrRefNotFound) {
		t.Fatalf("revision without digest: got %v, want ErrRefNotFound", err)
	}
}

// countingProxy stands between the client and the registry and counts
// the connections it accepts and the blobs it serves.
func countingProxy(t *testing.T, reg *testenv.Registry) (host string, conns, blobGets *atomic.Int32) {
	t.Helper()
	target, _ := url.Parse("http://" + reg.Host())
	rp := httputil.NewSingleHostReverseProxy(target)
	conns, blobGets = new(atomic.Int32), new(atomic.Int32)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), conns, blobGets
}

// TestFetchRefusesLayersOverMaxSize refuses, from the manifest's
// descriptor, a layer larger than MaxSize before pulling it, whatever
// the verb and the operation.
func TestFetchRefusesLayersOverMaxSize(t *testing.T) {
	f := setup(t)
	host, _, blobGets := countingProxy(t, f.reg)
	repoURL := "oci://" + host + "/manifests"
	opts := f.opts
	opts.DockerConfigJSON = []byte(`{"auths":{"` + host + `":{"username":"flux","password":"s3cret"}}}`)
	opts.Ref = oci.Ref{Tag: "v1.0.0"}
	ctx := context.Background()
	rev, err := oci.Resolve(ctx, repoURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	var layer ocispec.Descriptor
	if _, layer, err = layerOf(ctx, repoURL, rev.String, opts); err != nil {
		t.Fatal(err)
	}
	blobGets.Store(0)
	small := opts
	small.MaxSize = layer.Size - 1
	verbs := map[string]func(oci.Options) error{
		"Fetch": func(o oci.Options) error {
			st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
			_, err := oci.Fetch(ctx, st, obj, repoURL, o)
			return err
		},
		"FetchRevision": func(o oci.Options) error {
			st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
			_, err := oci.FetchRevision(ctx, st, obj, repoURL, rev.String, o)
			return err
		},
		"Pull": func(o oci.Options) error {
			_, err := oci.Pull(ctx, repoURL, t.TempDir(), o)
			return err
		},
		"ReadRevision": func(o oci.Options) error {
			_, _, err := oci.ReadRevision(ctx, repoURL, rev.String, o)
			return err
		},
	}
	for name, verb := range verbs {
		for _, op := range []oci.Operation{oci.Extract, oci.Copy} {
			o := small
			o.Layer.Operation = op
			err := verb(o)
			want := []string{repoURL, strconv.FormatInt(layer.Size, 10), strconv.FormatInt(small.MaxSize, 10), "MaxSize"}
			if !errors.Is(err, source.ErrTooLarge) || !containsAll(err.Error(), want) {
				t.Errorf("%s %s: got %v, want ErrTooLarge naming %q", name, op, err, want)
			}
		}
	}
	if n := blobGets.Load(); n != 0 {
		t.Fatalf("%d layers over the limit were pulled", n)
	}
	exact := opts
	exact.MaxSize = layer.Size
	if err := verbs["Fetch"](exact); err != nil {
		t.Fatalf("a layer of exactly MaxSize: %v", err)
	}
}

// layerOf returns the content and descriptor of the first layer of rev.
func layerOf(ctx context.Context, repoURL, rev string, opts oci.Options) ([]byte, ocispec.Descriptor, error) {
	opts.MaxSize = -1
	b, res, err := oci.ReadRevision(ctx, repoURL, rev, opts)
	return b, res.Layer, err
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

package bucket_test

import (
	"context"
	"crypto/md5" //nolint:gosec // the S3 ETag of a single-part object
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/bucket"
)

// s3 is one SeaweedFS for the package, started by the first test that
// needs it (the pure and fuzz tests do not).
var s3 *testenv.S3

var (
	s3Once sync.Once
	s3Err  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if s3 != nil {
		s3.Close()
	}
	os.Exit(code)
}

func startS3() { s3, s3Err = testenv.StartS3(testenv.S3Options{}) }

func needS3(t *testing.T) {
	t.Helper()
	s3Once.Do(startS3)
	if s3Err != nil {
		t.Fatal(s3Err)
	}
}

// fill creates a bucket holding files (key → content).
func fill(t *testing.T, name string, files map[string]string) {
	t.Helper()
	needS3(t)
	ctx := context.Background()
	if err := s3.MakeBucket(ctx, name); err != nil {
		t.Fatal(err)
	}
	for k, v := range files {
		if err := s3.Put(ctx, name, k, v); err != nil {
			t.Fatal(err)
		}
	}
}

func server() bucket.Server {
	return bucket.Server{Endpoint: s3.Endpoint(), Insecure: true, AccessKey: s3.AccessKey(), SecretKey: s3.SecretKey(), Region: "us-east-1"}
}

func newStore(t *testing.T) *source.Store {
	t.Helper()
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// files returns the artifact's files and their content.
func files(t *testing.T, st *source.Store, a source.Artifact) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := st.Extract(context.Background(), a, dir, source.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fluxRevision computes the revision Flux gives these objects, from their
// content: a single-part object's ETag is the MD5 of its content.
func fluxRevision(objs map[string]string) string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		sum := md5.Sum([]byte(objs[k])) //nolint:gosec
		fmt.Fprintf(h, "%s %s\n", k, hex.EncodeToString(sum[:]))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// objectGets returns the keys of bucket that were downloaded.
func objectGets(name string) []string {
	var out []string
	for _, r := range s3.Requests() {
		if r.Method == "GET" && strings.HasPrefix(r.Path, "/"+name+"/") && len(r.Path) > len(name)+2 {
			out = append(out, strings.TrimPrefix(r.Path, "/"+name+"/"))
		}
	}
	slices.Sort(out)
	return out
}

func TestFetchStoresTheBucketAsFluxDoes(t *testing.T) {
	ctx := context.Background()
	fill(t, "manifests", map[string]string{
		".sourceignore":      "*.md\n",
		"apps/cm.yaml":       "kind: ConfigMap\n",
		"apps/README.md":     "docs\n",
		"apps/dev/cm.yaml":   "kind: ConfigMap\nmetadata: {name: dev}\n",
		"apps/dev/skip.yaml": "skip\n",
		"other/outside.yaml": "not under the prefix\n",
		"apps/.sourceignore": "not the root one\n",
	})
	st := newStore(t)
	obj := source.Object{Kind: "Bucket", Namespace: "ns", Name: "manifests"}
	res, err := bucket.Fetch(ctx, st, obj, "manifests", bucket.Options{Server: server(), Prefix: "apps/", Ignore: []string{"skip.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"apps/cm.yaml":       "kind: ConfigMap\n",
		"apps/dev/cm.yaml":   "kind: ConfigMap\nmetadata: {name: dev}\n",
		"apps/.sourceignore": "not the root one\n",
	}
	if rev := fluxRevision(want); res.Revision != rev || res.Artifact.Revision != rev {
		t.Fatalf("revision %s (artifact %s), want Flux's %s", res.Revision, res.Artifact.Revision, rev)
	}
	// Flux archives the root .sourceignore with the objects.
	want[".sourceignore"] = "*.md\n"
	if got := files(t, st, res.Artifact); !maps.Equal(got, want) {
		t.Fatalf("artifact holds %v, want %v", got, want)
	}
	if res.Downloaded != 3 || res.Reused != 0 {
		t.Fatalf("downloaded %d, reused %d; want 3 and 0", res.Downloaded, res.Reused)
	}
}

func TestFetchUnchangedBucketDownloadsNothing(t *testing.T) {
	ctx := context.Background()
	objs := map[string]string{"a.yaml": "a: 1\n", "b/b.yaml": "b: 1\n", "c.yaml": "c: 1\n"}
	fill(t, "unchanged", objs)
	st := newStore(t)
	obj := source.Object{Kind: "Bucket", Namespace: "ns", Name: "unchanged"}
	first, err := bucket.Fetch(ctx, st, obj, "unchanged", bucket.Options{Server: server()})
	if err != nil {
		t.Fatal(err)
	}
	s3.ResetRequests()
	again, err := bucket.Fetch(ctx, st, obj, "unchanged", bucket.Options{Server: server(), LastRevision: first.Revision, Reuse: first.Artifact})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Unchanged || again.Revision != first.Revision {
		t.Fatalf("second fetch: unchanged %v, revision %s; want unchanged %s", again.Unchanged, again.Revision, first.Revision)
	}
	// Only the root .sourceignore is asked for, as Flux does on every
	// reconcile (it is missing here).
	if got := objectGets("unchanged"); !slices.Equal(got, []string{".sourceignore"}) {
		t.Fatalf("an unchanged bucket downloaded %v", got)
	}

	// One object changes: only it is downloaded, the others come from the
	// previous artifact, and the artifact is the one a fresh fetch builds.
	if err := s3.Put(ctx, "unchanged", "b/b.yaml", "b: 2\n"); err != nil {
		t.Fatal(err)
	}
	s3.ResetRequests()
	next, err := bucket.Fetch(ctx, st, obj, "unchanged", bucket.Options{Server: server(), LastRevision: first.Revision, Reuse: first.Artifact})
	if err != nil {
		t.Fatal(err)
	}
	objs["b/b.yaml"] = "b: 2\n"
	if next.Unchanged || next.Revision != fluxRevision(objs) {
		t.Fatalf("after a change: unchanged %v, revision %s, want %s", next.Unchanged, next.Revision, fluxRevision(objs))
	}
	if got := objectGets("unchanged"); !slices.Equal(got, []string{".sourceignore", "b/b.yaml"}) {
		t.Fatalf("downloaded %v, want only the changed object", got)
	}
	if next.Downloaded != 1 || next.Reused != 2 {
		t.Fatalf("downloaded %d, reused %d; want 1 and 2", next.Downloaded, next.Reused)
	}
	fresh, err := bucket.Fetch(ctx, newStore(t), obj, "unchanged", bucket.Options{Server: server()})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Artifact.Digest != next.Artifact.Digest {
		t.Fatalf("reusing objects gave digest %s, a fresh fetch %s", next.Artifact.Digest, fresh.Artifact.Digest)
	}
}

func TestFetchRevisionRebuildsOnlyTheListedRevision(t *testing.T) {
	ctx := context.Background()
	fill(t, "rebuild", map[string]string{"a.yaml": "a\n", "d/b.yaml": "b\n"})
	obj := source.Object{Kind: "Bucket", Namespace: "ns", Name: "rebuild"}
	first, err := bucket.Fetch(ctx, newStore(t), obj, "rebuild", bucket.Options{Server: server()})
	if err != nil {
		t.Fatal(err)
	}
	again, err := bucket.FetchRevision(ctx, newStore(t), obj, "rebuild", first.Revision, bucket.Options{Server: server()})
	if err != nil {
		t.Fatal(err)
	}
	if again.Artifact.Digest != first.Artifact.Digest {
		t.Fatalf("rebuilt digest %s, want %s", again.Artifact.Digest, first.Artifact.Digest)
	}
	if err := s3.Remove(ctx, "rebuild", "a.yaml"); err != nil {
		t.Fatal(err)
	}
	_, err = bucket.FetchRevision(ctx, newStore(t), obj, "rebuild", first.Revision, bucket.Options{Server: server()})
	if !errors.Is(err, bucket.ErrRevisionGone) || !strings.Contains(err.Error(), "Bucket/ns/rebuild") {
		t.Fatalf("rebuilding a revision the bucket no longer holds: %v", err)
	}
}

func TestFetchBadInput(t *testing.T) {
	ctx := context.Background()
	fill(t, "present", map[string]string{"a.yaml": "a\n"})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()
	wrong := server()
	wrong.SecretKey = "wrong"
	anonymous := server()
	anonymous.AccessKey, anonymous.SecretKey = "", ""
	dead := server()
	dead.Endpoint, dead.MaxRetries = deadAddr, 1
	untrusted := server()
	untrusted.Endpoint, untrusted.Insecure, untrusted.MaxRetries = s3.TLSEndpoint(), false, 1
	for _, tc := range []struct {
		name, bucket string
		server       bucket.Server
		want         error
		msg          string
	}{
		{"wrong secret key", "present", wrong, source.ErrAuth, "authentication failed"},
		{"anonymous", "present", anonymous, source.ErrAuth, "authentication failed"},
		{"bucket not found", "absent", server(), source.ErrRefNotFound, "bucket 'absent' not found"},
		{"endpoint not answering", "present", dead, source.ErrUnreachable, "connection refused"},
		{"unknown CA", "present", untrusted, source.ErrUnreachable, "certificate signed by unknown authority"},
		{"endpoint with a scheme", "present", bucket.Server{Endpoint: "http://" + s3.Endpoint()}, nil, "without a scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := source.Object{Kind: "Bucket", Namespace: "ns", Name: "bad"}
			_, err := bucket.Fetch(ctx, newStore(t), obj, tc.bucket, bucket.Options{Server: tc.server, Timeout: 20 * time.Second})
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) ||
				!strings.Contains(err.Error(), "Bucket/ns/bad") {
				t.Fatalf("got %v, want %v mentioning %q and the object", err, tc.want, tc.msg)
			}
			if strings.Contains(err.Error(), s3.SecretKey()) || strings.Contains(err.Error(), "wrong") {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

func TestFetchOverTLSWithTheCA(t *testing.T) {
	fill(t, "tls", map[string]string{"a.yaml": "a\n"})
	srv := server()
	srv.Endpoint, srv.Insecure = s3.TLSEndpoint(), false
	srv.TLSConfig = tlsConfig(t, s3.CACert())
	res, err := bucket.Fetch(context.Background(), newStore(t), source.Object{Kind: "Bucket", Namespace: "ns", Name: "tls"}, "tls", bucket.Options{Server: srv})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != fluxRevision(map[string]string{"a.yaml": "a\n"}) {
		t.Fatalf("revision %s", res.Revision)
	}
}

func TestFetchRefusesTooLargeBuckets(t *testing.T) {
	fill(t, "large", map[string]string{"a.yaml": strings.Repeat("a", 100), "b.yaml": strings.Repeat("b", 100)})
	_, err := bucket.Fetch(context.Background(), newStore(t), source.Object{Kind: "Bucket", Namespace: "ns", Name: "large"}, "large",
		bucket.Options{Server: server(), MaxSize: 150})
	if !errors.Is(err, source.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	for _, want := range []string{"bucket 'large' at " + s3.Endpoint(), "total 200 bytes", "limit of 150 bytes (MaxSize)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if got := objectGets("large"); slices.Contains(got, "a.yaml") {
		t.Fatalf("a bucket over the limit was downloaded: %v", got)
	}
}

func tlsConfig(t *testing.T, caPEM []byte) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

var errRefused = errors.New("refused by the test's dial hook")

// TestFetchDialHook checks that the endpoint is reached through
// Server.Dial only.
func TestFetchDialHook(t *testing.T) {
	ctx := context.Background()
	fill(t, "dial", map[string]string{"a.yaml": "a\n"})
	obj := source.Object{Kind: "Bucket", Namespace: "ns", Name: "dial"}
	refused := server()
	refused.MaxRetries = 1
	refused.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errRefused }
	s3.ResetRequests()
	if _, err := bucket.Fetch(ctx, newStore(t), obj, "dial", bucket.Options{Server: refused}); !errors.Is(err, errRefused) {
		t.Errorf("Fetch: got %v, want the hook's error", err)
	}
	if _, err := bucket.List(ctx, "dial", bucket.Options{Server: refused}); !errors.Is(err, errRefused) {
		t.Errorf("List: got %v, want the hook's error", err)
	}
	if got := s3.Requests(); len(got) != 0 {
		t.Fatalf("the server saw %d requests", len(got))
	}

	allowed := server()
	allowed.Dial = egress.Policy{}.Dialer(egress.Source, nil).DialContext
	res, err := bucket.Fetch(ctx, newStore(t), obj, "dial", bucket.Options{Server: allowed})
	if err != nil || res.Revision != fluxRevision(map[string]string{"a.yaml": "a\n"}) {
		t.Fatalf("the policy's dialer to the loopback endpoint: %+v %v", res, err)
	}
}

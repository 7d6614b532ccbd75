package source_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

var obj = source.Object{Kind: "GitRepository", Namespace: "flux-system", Name: "podinfo"}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func put(t testing.TB, st *source.Store, o source.Object, content string) source.Artifact {
	t.Helper()
	a, err := st.Put(context.Background(), o, "rev-"+content, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func countFiles(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestStoreRetentionByCount(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{RetentionRecords: 3, RetentionTTL: time.Hour, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	var last source.Artifact
	for i := range 6 {
		last = put(t, st, obj, fmt.Sprint(i))
	}
	removed, err := st.GC(context.Background(), obj, last)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(st.Path(last))
	if n := countFiles(t, dir); n != 3 || len(removed) != 3 {
		t.Fatalf("kept %d, removed %v; want 3 and 3", n, removed)
	}
	if !st.Exists(last) {
		t.Fatal("current artifact was collected")
	}
	// The current artifact is kept even when it is the oldest.
	first := put(t, st, obj, "0")
	c.t = c.t.Add(time.Minute)
	put(t, st, obj, "x")
	put(t, st, obj, "y")
	put(t, st, obj, "z")
	if _, err := st.GC(context.Background(), obj, first); err != nil {
		t.Fatal(err)
	}
	if n := countFiles(t, dir); n != 3 || !st.Exists(first) {
		t.Fatalf("kept %d, current kept: %v", n, st.Exists(first))
	}
}

func TestStoreRetentionByTTL(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{RetentionRecords: 10, RetentionTTL: time.Minute, Now: c.now})
	put(t, st, obj, "old")
	c.t = c.t.Add(time.Hour)
	put(t, st, obj, "recent")
	cur := put(t, st, obj, "current")
	// A temporary file left by a crash is collected too.
	os.WriteFile(filepath.Join(filepath.Dir(st.Path(cur)), ".tmp-123"), nil, 0o644)
	removed, err := st.GC(context.Background(), obj, cur)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || countFiles(t, filepath.Dir(st.Path(cur))) != 2 {
		t.Fatalf("removed %v", removed)
	}
}

func TestStoreGCOrphans(t *testing.T) {
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	live := source.Object{Kind: "OCIRepository", Namespace: "a", Name: "live"}
	gone := source.Object{Kind: "OCIRepository", Namespace: "b", Name: "gone"}
	a := put(t, st, live, "1")
	g := put(t, st, gone, "2")
	removed, err := st.GCOrphans(context.Background(), []source.Object{live})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "ocirepository/b/gone" || st.Exists(g) || !st.Exists(a) {
		t.Fatalf("removed %v", removed)
	}
	if _, err := os.Stat(filepath.Join(st.Root(), "ocirepository", "b")); !os.IsNotExist(err) {
		t.Fatal("empty namespace directory left behind")
	}
}

func TestStoreConcurrentWriters(t *testing.T) {
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Go(func() {
			a, err := st.Put(context.Background(), obj, "r", strings.NewReader(strings.Repeat(fmt.Sprint(i%4), 1<<16)))
			if err == nil {
				err = st.Verify(a)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := countFiles(t, filepath.Join(st.Root(), "gitrepository", "flux-system", "podinfo")); n != 4 {
		t.Fatalf("%d files, want 4 (no temporary file left)", n)
	}
}

func TestStoreTamperedArtifact(t *testing.T) {
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	a, err := st.Archive(context.Background(), obj, t.TempDir(), "r", source.ArchiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(st.Path(a), []byte("tampered"), 0o644)
	if err := st.Verify(a); !errors.Is(err, source.ErrDigestMismatch) {
		t.Fatalf("Verify: %v", err)
	}
	if err := st.Extract(context.Background(), a, t.TempDir(), source.ExtractOptions{}); err == nil {
		t.Fatal("Extract accepted a tampered artifact")
	}
	if _, err := st.Open(source.Artifact{Path: "x/y/z/none.tar.gz"}); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("Open: %v", err)
	}
	if _, err := st.Put(context.Background(), source.Object{Kind: "K", Namespace: "..", Name: "x"}, "r", strings.NewReader("")); !errors.Is(err, source.ErrInvalidObject) {
		t.Fatalf("Put: %v", err)
	}
}

func TestServer(t *testing.T) {
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	a := put(t, st, obj, "hello")
	os.WriteFile(filepath.Join(st.Root(), "secret"), []byte("no"), 0o644)
	srv, err := source.NewServer(st, source.ServerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Fatalf("bound to %s", srv.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()

	resp, err := http.Get("http://" + srv.Addr() + "/" + a.Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Fatalf("GET %s: %d %q", a.Path, resp.StatusCode, body)
	}
	for _, p := range []string{
		"/gitrepository/flux-system/podinfo/../../../../secret",
		"/gitrepository/flux-system/podinfo/%2e%2e/%2e%2e/%2e%2e/secret",
		"/gitrepository/flux-system/..%2f..%2fsecret",
		"/secret",
	} {
		if code := rawGet(t, srv.Addr(), p); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", p, code)
		}
	}
	if code := rawGet(t, srv.Addr(), "/gitrepository/flux-system/podinfo/none.tar.gz"); code != http.StatusNotFound {
		t.Errorf("missing artifact: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start returned %v", err)
	}
}

// rawGet sends the path as is: http.Client would clean it.
func rawGet(t *testing.T, addr, p string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", p)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A caller that writes the server's address in its store's URLs binds the
// port first and hands the listener over: the URL names the served port.
func TestServerServesTheGivenListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{BaseURL: "http://" + ln.Addr().String()})
	srv, err := source.NewServer(st, source.ServerOptions{Addr: "127.0.0.1:0", Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != ln.Addr().String() {
		t.Fatalf("serves %s, want the given listener's %s", srv.Addr(), ln.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	a := put(t, st, obj, "hello")
	resp, err := http.Get(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", a.URL, resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

package source_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

const outsideSecret = "outside-the-store-4b2d"

// rawRequest sends the request line as is (http.Client would clean the
// path) and returns the status and body.
func rawRequest(t *testing.T, addr, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func startServer(t *testing.T, st *source.Store, opts source.ServerOptions) *source.Server {
	t.Helper()
	srv, err := source.NewServer(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	return srv
}

// The artifact server serves files of the store only: no traversal, plain
// or encoded, no absolute path, no symlink in the store that points out of
// it, and no encoded separator reaches the file system.
func TestServerRefusesPathsOutsideTheStore(t *testing.T) {
	top := t.TempDir()
	if err := os.WriteFile(filepath.Join(top, "secret"), []byte(outsideSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := source.NewStore(filepath.Join(top, "store"), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := put(t, st, obj, "hello")
	dir := path.Dir(a.Path)
	// Symlinks planted in the store: a file and a directory pointing out,
	// and one pointing to an artifact inside.
	if err := os.Symlink(filepath.Join(top, "secret"), filepath.Join(st.Root(), filepath.FromSlash(dir), "out.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(top, filepath.Join(st.Root(), "gitrepository", "flux-system", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path.Base(a.Path), filepath.Join(st.Root(), filepath.FromSlash(dir), "in.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.Root(), "secret"), []byte(outsideSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, st, source.ServerOptions{Addr: "127.0.0.1:0"})

	if code, body := rawRequest(t, srv.Addr(), "/"+a.Path); code != http.StatusOK || body != "hello" {
		t.Fatalf("GET the artifact: %d %q", code, body)
	}
	// A symlink that stays inside the store is an ordinary path.
	if code, body := rawRequest(t, srv.Addr(), "/"+dir+"/in.tar.gz"); code != http.StatusOK || body != "hello" {
		t.Errorf("GET a symlink inside the store: %d %q", code, body)
	}
	for _, target := range []string{
		"/" + dir + "/out.tar.gz",
		"/gitrepository/flux-system/escape/secret",
		"/" + dir + "/../../../../secret",
		"/" + dir + "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret",
		"/" + dir + "/%2E%2e/%2e%2E/%2E%2E/%2e%2e/secret",
		"/" + dir + "/.%2e/.%2e/.%2e/.%2e/secret",
		"/gitrepository/flux-system/..%2f..%2fsecret",
		"/gitrepository%2fflux-system%2fpodinfo%2f..%2f..%2f..%2fsecret",
		"/gitrepository/flux-system/podinfo/%2Fsecret",
		"/gitrepository/flux-system/podinfo/..%5c..%5c..%5csecret",
		"/gitrepository/flux-system/podinfo/x%00/secret",
		"//" + filepath.Join(top, "secret"),
		"/" + filepath.Join(top, "secret"),
		"http://x/" + dir + "/../../../../secret",
		"/secret",
		"/./secret",
		"/gitrepository/flux-system/podinfo/.hidden",
	} {
		code, body := rawRequest(t, srv.Addr(), target)
		if code == http.StatusOK || strings.Contains(body, outsideSecret) {
			t.Errorf("GET %s: %d %q, want a refusal", target, code, body)
		}
	}
}

// The server listens on the address it is given, loopback by default, and
// on no other interface.
func TestServerListensOnTheGivenAddressOnly(t *testing.T) {
	st, err := source.NewStore(t.TempDir(), source.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The zero value binds 127.0.0.1:9090; the port may be taken on a
	// shared machine, and then the error names the loopback address.
	if srv, err := source.NewServer(st, source.ServerOptions{}); err != nil {
		if !strings.Contains(err.Error(), "127.0.0.1:9090") {
			t.Fatalf("default bind failed with %v, which names no loopback address", err)
		}
	} else {
		if srv.Addr() != "127.0.0.1:9090" {
			t.Errorf("the default address is %s, want 127.0.0.1:9090", srv.Addr())
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Start(ctx)
	}
	srv := startServer(t, st, source.ServerOptions{Addr: "127.0.0.1:0"})
	_, port, _ := net.SplitHostPort(srv.Addr())
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		checked++
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), port), 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("a server bound to %s answers on %s", srv.Addr(), ipn.IP)
		}
	}
	if checked == 0 {
		t.Log("the machine has no non-loopback address: only the bound address was checked")
	}
	if c, err := net.Dial("tcp", srv.Addr()); err != nil {
		t.Fatalf("the bound address does not answer: %v", err)
	} else {
		c.Close()
	}
}

package git_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cozystack/cozy-aio/internal/egress"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

var errRefused = errors.New("refused by the test's dial hook")

func refuse(context.Context, string, string) (net.Conn, error) { return nil, errRefused }

// policyDial is the engine's hook with the default policy, which lets
// sources reach loopback.
var policyDial = egress.Policy{}.Dialer(egress.Source, nil).DialContext

// forwarder listens on 127.0.0.1, counts the connections it accepts and
// relays each to target.
func forwarder(t *testing.T, target string) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { _, _ = io.Copy(s, c) }()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
	return ln.Addr().String(), &accepted
}

// TestFetchDialHookHTTP checks that every connection of a fetch over HTTP
// goes through Options.Dial, and only through the hook of its own fetch.
func TestFetchDialHookHTTP(t *testing.T) {
	f := setup(t)
	u, _ := url.Parse(f.url)
	addr, accepted := forwarder(t, u.Host)
	repoURL := "http://" + addr + u.Path
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	ctx := context.Background()

	t.Run("a refusing hook fails the fetch before any connection", func(t *testing.T) {
		accepted.Store(0)
		for name, ref := range map[string]git.Ref{"ls-remote": {Branch: "main"}, "fetch": {Commit: f.first}} {
			_, err := git.Fetch(ctx, st, obj, repoURL, git.Options{Ref: ref, Auth: auth, Dial: refuse})
			if !errors.Is(err, errRefused) {
				t.Errorf("%s: got %v, want the hook's error", name, err)
			}
		}
		if _, err := git.FetchRevision(ctx, st, obj, repoURL, "main@sha1:"+f.third, git.Options{Auth: auth, Dial: refuse}); !errors.Is(err, errRefused) {
			t.Errorf("FetchRevision: got %v, want the hook's error", err)
		}
		if n := accepted.Load(); n != 0 {
			t.Fatalf("the server accepted %d connections", n)
		}
	})

	t.Run("the policy's dialer lets the loopback server through", func(t *testing.T) {
		res, err := git.Fetch(ctx, st, obj, repoURL, git.Options{Ref: git.Ref{Branch: "main"}, Auth: auth, Dial: policyDial})
		if err != nil || res.Revision.String != "main@sha1:"+f.third {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("concurrent fetches keep their own hooks", func(t *testing.T) {
		accepted.Store(0)
		var dials atomic.Int32
		count := func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := git.Fetch(ctx, st, obj, repoURL, git.Options{Ref: git.Ref{Branch: "main"}, Auth: auth, Dial: refuse}); !errors.Is(err, errRefused) {
					t.Errorf("refused fetch: %v", err)
				}
			})
			wg.Go(func() {
				if _, err := git.Fetch(ctx, st, obj, repoURL, git.Options{Ref: git.Ref{Branch: "main"}, Auth: auth, Dial: count}); err != nil {
					t.Errorf("allowed fetch: %v", err)
				}
			})
		}
		wg.Wait()
		if d, a := dials.Load(), accepted.Load(); d == 0 || d != a {
			t.Fatalf("the allowed fetches dialled %d connections, the server accepted %d", d, a)
		}
	})

	t.Run("schemes the hook cannot reach are refused", func(t *testing.T) {
		accepted.Store(0)
		_, err := git.Fetch(ctx, st, obj, "git://"+addr+u.Path, git.Options{Ref: git.Ref{Branch: "main"}})
		if err == nil || !strings.Contains(err.Error(), `scheme "git" is not supported`) {
			t.Fatalf("git://: %v", err)
		}
		if n := accepted.Load(); n != 0 {
			t.Fatalf("the server accepted %d connections", n)
		}
	})
}

// TestFetchDialHookSSH checks that the SSH connection goes through
// Options.Dial.
func TestFetchDialHookSSH(t *testing.T) {
	f := setup(t)
	repoURL, clientKey, knownHosts := sshRepo(t, f)
	u, _ := url.Parse(repoURL)
	addr, accepted := forwarder(t, u.Host)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "ssh"}
	sshAuth := git.Auth{SSHPrivateKey: clientKey, KnownHosts: knownHosts}
	ctx := context.Background()

	for name, ref := range map[string]git.Ref{"ls-remote": {Branch: "main"}, "fetch": {Commit: f.first}} {
		_, err := git.Fetch(ctx, st, obj, "ssh://"+addr+u.Path, git.Options{Ref: ref, Auth: sshAuth, Dial: refuse})
		if !errors.Is(err, errRefused) {
			t.Errorf("%s: got %v, want the hook's error", name, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the server accepted %d connections", n)
	}
	res, err := git.Fetch(ctx, st, obj, repoURL, git.Options{Ref: git.Ref{Branch: "main"}, Auth: sshAuth, Dial: policyDial})
	if err != nil || res.Revision.String != "main@sha1:"+f.third {
		t.Fatalf("%+v %v", res, err)
	}
}

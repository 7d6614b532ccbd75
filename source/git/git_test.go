package git_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/internal/testenv"
	"github.com/cozystack/cozy-aio/source"
	"github.com/cozystack/cozy-aio/source/git"
)

const user, pass = "flux", "s3cret"

var auth = git.Auth{Username: user, Password: pass}

type fixture struct {
	srv                  *testenv.GitServer
	url                  string
	first, second, third string // commits on main
	feature              string // commit on branch feature
}

func setup(t *testing.T) *fixture {
	t.Helper()
	srv, err := testenv.StartGitServer(testenv.GitOptions{Username: user, Password: pass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	repo, err := srv.Repo("app.git")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, url: repo.URL()}
	must := func(sha string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	f.first = must(repo.Commit("main", map[string]string{"deploy/app.yaml": "version: 1\n"}, "one"))
	must("", repo.Tag("v1.0.0", f.first))
	f.second = must(repo.Commit("main", map[string]string{"deploy/app.yaml": "version: 1.1\n", ".sourceignore": "*.md\n", "README.md": "x"}, "two"))
	must("", repo.Tag("v1.1.0", f.second))
	must("", repo.Tag("not-a-version", f.second))
	f.third = must(repo.Commit("main", map[string]string{"deploy/app.yaml": "version: 2\n"}, "three"))
	must("", repo.Tag("v2.0.0", f.third))
	f.feature = must(repo.Commit("feature", map[string]string{"deploy/app.yaml": "version: feature\n"}, "feature"))
	return f
}

func fileOf(t *testing.T, st *source.Store, a source.Artifact, p string) string {
	t.Helper()
	dir := t.TempDir()
	if err := st.Extract(context.Background(), a, dir, source.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		return ""
	}
	return string(b)
}

func TestFetchRefKinds(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	cases := []struct {
		name    string
		ref     git.Ref
		rev     string
		content string
	}{
		{"branch", git.Ref{Branch: "main"}, "main@sha1:" + f.third, "version: 2\n"},
		{"other branch", git.Ref{Branch: "feature"}, "feature@sha1:" + f.feature, "version: feature\n"},
		{"annotated tag", git.Ref{Tag: "v1.0.0"}, "v1.0.0@sha1:" + f.first, "version: 1\n"},
		{"semver", git.Ref{SemVer: ">=1.0.0 <2.0.0"}, "v1.1.0@sha1:" + f.second, "version: 1.1\n"},
		{"semver latest", git.Ref{SemVer: "*"}, "v2.0.0@sha1:" + f.third, "version: 2\n"},
		{"commit", git.Ref{Commit: f.first}, "sha1:" + f.first, "version: 1\n"},
		{"commit on branch", git.Ref{Branch: "main", Commit: f.second}, "main@sha1:" + f.second, "version: 1.1\n"},
		{"refname branch", git.Ref{Name: "refs/heads/main"}, "refs/heads/main@sha1:" + f.third, "version: 2\n"},
		{"refname tag", git.Ref{Name: "refs/tags/v1.1.0"}, "refs/tags/v1.1.0@sha1:" + f.second, "version: 1.1\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := git.Fetch(context.Background(), st, obj, f.url, git.Options{Ref: tc.ref, Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			if res.Revision.String != tc.rev || res.Artifact.Revision != tc.rev || res.Unchanged {
				t.Fatalf("revision %q (artifact %q), want %q", res.Revision.String, res.Artifact.Revision, tc.rev)
			}
			if got := fileOf(t, st, res.Artifact, "deploy/app.yaml"); got != tc.content {
				t.Fatalf("deploy/app.yaml = %q, want %q", got, tc.content)
			}
		})
	}
}

func TestFetchHonoursSourceIgnore(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	res, err := git.Fetch(context.Background(), st, source.Object{Kind: "GitRepository", Namespace: "ns", Name: "a"}, f.url,
		git.Options{Ref: git.Ref{Tag: "v1.1.0"}, Auth: auth, Ignore: []string{"deploy/"}})
	if err != nil {
		t.Fatal(err)
	}
	if fileOf(t, st, res.Artifact, "README.md") != "" || fileOf(t, st, res.Artifact, "deploy/app.yaml") != "" {
		t.Fatal("ignored files were archived")
	}
	if fileOf(t, st, res.Artifact, ".sourceignore") == "" {
		t.Fatal(".sourceignore missing")
	}
}

func TestFetchDefaultsToRemoteHEAD(t *testing.T) {
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, _ := srv.Repo("plain.git")
	sha, err := repo.Commit("master", map[string]string{"a": "a"}, "init")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := git.Resolve(context.Background(), repo.URL(), git.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rev.String != "master@sha1:"+sha {
		t.Fatalf("revision %q", rev.String)
	}
}

func TestFetchUnchanged(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	opts := git.Options{Ref: git.Ref{Branch: "main"}, Auth: auth, LastRevision: "main@sha1:" + f.third}
	res, err := git.Fetch(context.Background(), st, obj, f.url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Unchanged || res.Artifact.Path != "" {
		t.Fatalf("expected no re-fetch, got %+v", res)
	}
	opts.LastRevision = "main@sha1:" + f.second
	if res, err = git.Fetch(context.Background(), st, obj, f.url, opts); err != nil || res.Unchanged {
		t.Fatalf("expected a fetch: %+v %v", res, err)
	}
}

func TestFetchErrors(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	hang := hangingServer(t)
	cases := []struct {
		name string
		url  string
		opts git.Options
		want error
	}{
		{"wrong password", f.url, git.Options{Ref: git.Ref{Branch: "main"}, Auth: git.Auth{Username: user, Password: "nope"}}, source.ErrAuth},
		{"no credentials", f.url, git.Options{Ref: git.Ref{Branch: "main"}}, source.ErrAuth},
		{"missing branch", f.url, git.Options{Ref: git.Ref{Branch: "nope"}, Auth: auth}, source.ErrRefNotFound},
		{"missing tag", f.url, git.Options{Ref: git.Ref{Tag: "v9"}, Auth: auth}, source.ErrRefNotFound},
		{"missing commit", f.url, git.Options{Ref: git.Ref{Commit: strings.Repeat("ab", 20)}, Auth: auth}, source.ErrRefNotFound},
		{"malformed commit", f.url, git.Options{Ref: git.Ref{Commit: "abc"}, Auth: auth}, source.ErrRefNotFound},
		{"empty semver match", f.url, git.Options{Ref: git.Ref{SemVer: ">=3.0.0"}, Auth: auth}, source.ErrNoSemverMatch},
		{"bad semver", f.url, git.Options{Ref: git.Ref{SemVer: "not a range"}, Auth: auth}, source.ErrNoSemverMatch},
		{"missing repository", f.srv.URL("nope.git"), git.Options{Ref: git.Ref{Branch: "main"}, Auth: auth}, source.ErrRefNotFound},
		{"unreachable host", "http://127.0.0.1:1/app.git", git.Options{Ref: git.Ref{Branch: "main"}}, source.ErrUnreachable},
		{"timeout", hang + "/app.git", git.Options{Ref: git.Ref{Branch: "main"}, Timeout: 300 * time.Millisecond}, source.ErrUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := git.Fetch(context.Background(), st, obj, tc.url, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

// hangingServer accepts connections and never answers.
func hangingServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestFetchBearerToken puts a gateway in front of the server that accepts
// only a bearer token, as Git hosts with token auth do.
func TestFetchBearerToken(t *testing.T) {
	f := setup(t)
	target, _ := url.Parse(f.url)
	target.Path = ""
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r.Header.Set("Authorization", basic)
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer gw.Close()
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	res, err := git.Fetch(context.Background(), st, obj, gw.URL+"/app.git", git.Options{Ref: git.Ref{Branch: "main"}, Auth: git.Auth{BearerToken: "t0ken"}})
	if err != nil || res.Revision.String != "main@sha1:"+f.third {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = git.Fetch(context.Background(), st, obj, gw.URL+"/app.git", git.Options{Ref: git.Ref{Branch: "main"}, Auth: git.Auth{BearerToken: "wrong"}})
	if !errors.Is(err, source.ErrAuth) {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestFetchThroughProxy sends every request through a forward proxy,
// which the Dial hook connects to.
func TestFetchThroughProxy(t *testing.T) {
	f := setup(t)
	var hits atomic.Int32
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		hits.Add(1)
		r.Out.URL = r.In.URL // absolute-form request: forward as is
	}})
	defer proxy.Close()
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	var mu sync.Mutex
	dialled := map[string]bool{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialled[addr] = true
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	res, err := git.Fetch(context.Background(), st, obj, f.url, git.Options{Ref: git.Ref{Tag: "v2.0.0"}, Auth: auth, ProxyURL: proxy.URL, Dial: dial})
	if err != nil || res.Revision.String != "v2.0.0@sha1:"+f.third {
		t.Fatalf("%+v %v", res, err)
	}
	if hits.Load() == 0 {
		t.Fatal("the proxy saw no request")
	}
	if pu, _ := url.Parse(proxy.URL); len(dialled) != 1 || !dialled[pu.Host] {
		t.Fatalf("the hook dialled %v, want only the proxy %s", dialled, pu.Host)
	}
}

// TestFetchRevisionRebuildsTheSameArtifact fetches revisions that Fetch
// wrote, some of whose references have moved on since, into a fresh store
// and gets the same bytes.
func TestFetchRevisionRebuildsTheSameArtifact(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	cases := []struct {
		name   string
		ref    git.Ref // what Fetch resolved when it built the artifact
		ignore []string
		rev    string
	}{
		{"branch tip", git.Ref{Branch: "main"}, nil, "main@sha1:" + f.third},
		{"branch that moved on", git.Ref{Branch: "main", Commit: f.first}, nil, "main@sha1:" + f.first},
		{"annotated tag", git.Ref{Tag: "v1.1.0"}, nil, "v1.1.0@sha1:" + f.second},
		{"tag with ignore rules", git.Ref{Tag: "v1.1.0"}, []string{"deploy/"}, "v1.1.0@sha1:" + f.second},
		{"refname", git.Ref{Name: "refs/heads/feature"}, nil, "refs/heads/feature@sha1:" + f.feature},
		{"bare commit", git.Ref{Commit: f.second}, nil, "sha1:" + f.second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			built, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
			want, err := git.Fetch(ctx, built, obj, f.url, git.Options{Ref: tc.ref, Auth: auth, Ignore: tc.ignore})
			if err != nil {
				t.Fatal(err)
			}
			if want.Artifact.Revision != tc.rev {
				t.Fatalf("Fetch wrote revision %q, want %q", want.Artifact.Revision, tc.rev)
			}
			fresh, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
			got, err := git.FetchRevision(ctx, fresh, obj, f.url, tc.rev, git.Options{Ref: git.Ref{Branch: "elsewhere"}, Auth: auth, Ignore: tc.ignore})
			if err != nil {
				t.Fatal(err)
			}
			if got.Artifact.Digest != want.Artifact.Digest || got.Artifact.Path != want.Artifact.Path || got.Artifact.Revision != tc.rev {
				t.Fatalf("rebuilt %+v, want %+v", got.Artifact, want.Artifact)
			}
			if err := fresh.Verify(got.Artifact); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFetchRevisionErrors(t *testing.T) {
	f := setup(t)
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "app"}
	for _, rev := range []string{"main", "main@sha1:abc", "@sha1:" + f.first, "main/" + f.first} {
		if _, err := git.FetchRevision(context.Background(), st, obj, f.url, rev, git.Options{Auth: auth}); err == nil {
			t.Errorf("revision %q: no error", rev)
		}
	}
	missing := strings.Repeat("ab", 20)
	for _, rev := range []string{"main@sha1:" + missing, "sha1:" + missing, "gone@sha1:" + missing} {
		_, err := git.FetchRevision(context.Background(), st, obj, f.url, rev, git.Options{Auth: auth})
		if !errors.Is(err, source.ErrRefNotFound) {
			t.Errorf("revision %q: got %v, want ErrRefNotFound", rev, err)
		}
	}
	_, err := git.FetchRevision(context.Background(), st, obj, f.url, "main@sha1:"+f.first, git.Options{Auth: git.Auth{Username: user, Password: "nope"}})
	if !errors.Is(err, source.ErrAuth) {
		t.Errorf("wrong password: %v", err)
	}
}

// TestFetchRevisionFindsCommitsNoRefPointsAt rebuilds commits that only the
// history of a branch holds.
func TestFetchRevisionFindsCommitsNoRefPointsAt(t *testing.T) {
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, _ := srv.Repo("history.git")
	old, err := repo.Commit("main", map[string]string{"a.yaml": "v: 1\n"}, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit("main", map[string]string{"a.yaml": "v: 2\n"}, "two"); err != nil {
		t.Fatal(err)
	}
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "history"}
	for _, rev := range []string{"main@sha1:" + old, "sha1:" + old, "deleted-branch@sha1:" + old} {
		st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
		res, err := git.FetchRevision(context.Background(), st, obj, repo.URL(), rev, git.Options{})
		if err != nil {
			t.Fatalf("%s: %v", rev, err)
		}
		if got := fileOf(t, st, res.Artifact, "a.yaml"); got != "v: 1\n" || res.Artifact.Revision != rev {
			t.Fatalf("%s: a.yaml = %q, revision %q", rev, got, res.Artifact.Revision)
		}
	}
}

func TestFetchSparseCheckout(t *testing.T) {
	srv, err := testenv.StartGitServer(testenv.GitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo, _ := srv.Repo("mono.git")
	sha, err := repo.Commit("main", map[string]string{
		"apps/a.yaml": "a\n", "apps/nested/b.yaml": "b\n", "infra/c.yaml": "c\n", "root.yaml": "r\n",
	}, "init")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	obj := source.Object{Kind: "GitRepository", Namespace: "ns", Name: "mono"}
	opts := git.Options{Ref: git.Ref{Branch: "main"}, SparseCheckout: []string{"./apps"}}
	res, err := git.Fetch(context.Background(), st, obj, repo.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if fileOf(t, st, res.Artifact, "apps/a.yaml") != "a\n" || fileOf(t, st, res.Artifact, "apps/nested/b.yaml") != "b\n" {
		t.Fatal("the sparse directory is missing from the artifact")
	}
	if fileOf(t, st, res.Artifact, "infra/c.yaml") != "" || fileOf(t, st, res.Artifact, "root.yaml") != "" {
		t.Fatal("files outside the sparse directories were archived")
	}
	if res.Artifact.Revision != "main@sha1:"+sha {
		t.Fatalf("revision %q", res.Artifact.Revision)
	}
	// A standby rebuilds the same artifact from the revision.
	fresh, _ := source.NewStore(t.TempDir(), source.StoreOptions{})
	got, err := git.FetchRevision(context.Background(), fresh, obj, repo.URL(), res.Artifact.Revision, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Artifact.Digest != res.Artifact.Digest {
		t.Fatalf("rebuilt digest %s, want %s", got.Artifact.Digest, res.Artifact.Digest)
	}
}

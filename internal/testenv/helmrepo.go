package testenv

import (
	"crypto/subtle"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// HelmRepoOptions configures StartHelmRepo. The zero value serves plain
// HTTP without auth.
type HelmRepoOptions struct {
	// Username and Password switch basic auth on when Username is set.
	Username, Password string
	// TLS serves HTTPS with a certificate of a test CA (see CACert).
	TLS bool
}

// HelmRepo is a Helm chart repository served by net/http in this process:
// charts packaged by Helm (chartutil.Save) and an index.yaml written by
// Helm's repo package, in a directory served as files. It counts the
// requests per path and the ones that carried credentials.
type HelmRepo struct {
	srv  *httptest.Server
	dir  string
	opts HelmRepoOptions

	mu       sync.Mutex
	requests map[string]int
	authed   map[string]int
	bodies   map[string]int
	override map[string][]byte
}

// StartHelmRepo starts a chart repository with an empty index.
func StartHelmRepo(opts HelmRepoOptions) (*HelmRepo, error) {
	dir, err := os.MkdirTemp("", "cozy-helmrepo-")
	if err != nil {
		return nil, err
	}
	r := &HelmRepo{dir: dir, opts: opts, requests: map[string]int{}, authed: map[string]int{}, bodies: map[string]int{}, override: map[string][]byte{}}
	files := http.FileServer(http.Dir(dir))
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, hasAuth := req.BasicAuth()
		r.mu.Lock()
		r.requests[req.URL.Path]++
		if hasAuth {
			r.authed[req.URL.Path]++
		}
		body, overridden := r.override[req.URL.Path]
		r.mu.Unlock()
		if opts.Username != "" && (!hasAuth || subtle.ConstantTimeCompare([]byte(u), []byte(opts.Username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(opts.Password)) != 1) {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		if overridden {
			sw.Write(body)
		} else {
			files.ServeHTTP(sw, req)
		}
		if sw.status == http.StatusOK {
			r.mu.Lock()
			r.bodies[req.URL.Path]++
			r.mu.Unlock()
		}
	})
	if opts.TLS {
		r.srv = httptest.NewTLSServer(h)
	} else {
		r.srv = httptest.NewServer(h)
	}
	if err := repo.NewIndexFile().WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close stops the server and removes the charts.
func (r *HelmRepo) Close() {
	r.srv.Close()
	os.RemoveAll(r.dir)
}

// Dir returns the directory the repository serves.
func (r *HelmRepo) Dir() string { return r.dir }

// URL returns the repository URL, http(s)://127.0.0.1:port.
func (r *HelmRepo) URL() string { return r.srv.URL }

// CACert returns the PEM certificate the HTTPS server presents (its own
// CA), for a certSecretRef's ca.crt.
func (r *HelmRepo) CACert() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

// chartModTime is the time of every file of the charts AddChart packages.
var chartModTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// AddChart packages a chart given as files (path → content, Chart.yaml at
// the top) with Helm and writes the index again with Helm's repo package,
// chart URLs relative to the repository. baseURL, when set, makes them
// absolute under it instead. It returns the archive's file name.
func (r *HelmRepo) AddChart(files map[string]string, baseURL string) (string, error) {
	var bf []*archive.BufferedFile
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// A fixed time: Helm stamps files without one with the time of
		// packaging, and the same chart packaged by two repositories (an
		// index entry pointing at another host) must have one digest.
		bf = append(bf, &archive.BufferedFile{Name: n, Data: []byte(files[n]), ModTime: chartModTime})
	}
	ch, err := loader.LoadFiles(bf)
	if err != nil {
		return "", fmt.Errorf("loading chart: %w", err)
	}
	p, err := chartutil.Save(ch, r.dir)
	if err != nil {
		return "", fmt.Errorf("packaging chart: %w", err)
	}
	idx, err := repo.IndexDirectory(r.dir, baseURL)
	if err != nil {
		return "", fmt.Errorf("indexing: %w", err)
	}
	if err := idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644); err != nil {
		return "", err
	}
	return filepath.Base(p), nil
}

// File returns the content of a file the repository serves.
func (r *HelmRepo) File(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(r.dir, path.Clean("/"+name)))
}

// Serve makes the server answer GET urlPath with body instead of the file
// there (for bad indexes and archives).
func (r *HelmRepo) Serve(urlPath string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.override[urlPath] = body
}

// Downloads returns how many requests for urlPath were answered 200 with
// the content (not 304 Not Modified, not an error).
func (r *HelmRepo) Downloads(urlPath string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[urlPath]
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Requests returns how many requests asked for urlPath, and how many of
// them carried basic-auth credentials.
func (r *HelmRepo) Requests(urlPath string) (total, withCredentials int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[urlPath], r.authed[urlPath]
}

package source

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServerOptions configures NewServer. The zero value listens on loopback.
type ServerOptions struct {
	// Addr is the listen address. Default: "127.0.0.1:9090". Binding
	// beyond loopback is the caller's explicit choice.
	Addr string
	// Listener, when set, is served instead of a new listener on Addr: a
	// caller that writes the address in its store's URLs binds a ":0" port
	// first, so the port it writes is the one served. Default: NewServer
	// listens on Addr.
	Listener net.Listener
	// ShutdownTimeout bounds the graceful shutdown when ctx ends.
	// Default: 5s.
	ShutdownTimeout time.Duration
	// Missing, when set, is asked about a request whose file the store
	// lacks, with the request's context and the artifact's path
	// (<kind>/<namespace>/<name>/<file>). It reports whether the server
	// should hold that file (a status names it), and may wait, briefly and
	// within ctx, for it to be stored; it must not start work to get it,
	// since anyone who reaches the server can ask. The file is then looked
	// up again: still missing, it is a 503 with Retry-After; Missing
	// returning false makes it a 404. A request carrying the NoFetchHeader
	// never calls it. Default: a missing file is a 404.
	Missing func(ctx context.Context, path string) bool
	// RetryAfter is the Retry-After of a 503 for a file Missing said the
	// server should hold. Default: 5s.
	RetryAfter time.Duration
}

// NoFetchHeader, set on a request, tells the server to answer at once
// from what it holds (ServerOptions.Missing is not asked): replicas
// fetching from one another fall back to upstream at once, rather than
// wait on a replica that waits in turn.
const NoFetchHeader = "X-Cozy-Aio-No-Fetch"

// Server serves a store over HTTP with Flux's layout,
// GET /<kind>/<namespace>/<name>/<file>. It serves complete artifacts
// only, and refuses paths with ".." segments or encoded dots, separators
// or NULs, hidden files, symlinks that leave the store, and anything that
// is not a regular file four levels deep.
type Server struct {
	store *Store
	ln    net.Listener
	opts  ServerOptions
}

// NewServer binds the listen address (or takes opts.Listener), so that
// Addr is known before Start.
func NewServer(store *Store, opts ServerOptions) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:9090"
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", opts.Addr); err != nil {
			return nil, err
		}
	}
	return &Server{store: store, ln: ln, opts: opts}, nil
}

// Addr returns the bound address, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start serves until ctx ends, then shuts down gracefully. It returns nil
// on a clean shutdown.
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// Handler returns the HTTP handler, for callers that run their own server.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p, ok := artifactPath(r)
	if !ok {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	// Opened through an os.Root: a symlink in the store that points out of
	// it is refused, whatever wrote it there.
	root, err := os.OpenRoot(s.store.Root())
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer root.Close()
	f, ok := s.open(w, r, root, p)
	if !ok {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// open opens the file at p, asking Missing about one the store lacks, or
// answers the request itself.
func (s *Server) open(w http.ResponseWriter, r *http.Request, root *os.Root, p string) (*os.File, bool) {
	f, err := root.Open(filepath.FromSlash(p))
	if err == nil {
		return f, true
	}
	if !errors.Is(err, fs.ErrNotExist) || s.opts.Missing == nil || r.Header.Get(NoFetchHeader) != "" || !s.opts.Missing(r.Context(), p) {
		http.NotFound(w, r)
		return nil, false
	}
	if f, err = root.Open(filepath.FromSlash(p)); err == nil {
		return f, true
	}
	if errors.Is(err, fs.ErrNotExist) {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.opts.RetryAfter.Seconds()))))
		http.Error(w, "artifact not stored here yet", http.StatusServiceUnavailable)
		return nil, false
	}
	http.NotFound(w, r)
	return nil, false
}

// artifactPath validates both the raw and the decoded request path, so
// that neither "/../" nor "%2e%2e" gets through.
func artifactPath(r *http.Request) (string, bool) {
	for _, raw := range []string{r.URL.RawPath, r.URL.Path, r.RequestURI} {
		lower := strings.ToLower(raw)
		if strings.Contains(raw, "..") || strings.Contains(lower, "%2e") {
			return "", false
		}
		// An encoded separator or NUL never names an artifact.
		if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(lower, "%00") {
			return "", false
		}
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	segs := strings.Split(p, "/")
	if len(segs) != 4 {
		return "", false
	}
	for _, s := range segs {
		if s == "" || strings.HasPrefix(s, ".") || strings.ContainsAny(s, `\`+"\x00") {
			return "", false
		}
	}
	return p, true
}

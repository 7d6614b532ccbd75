package statuspage

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/status"
	"github.com/cozystack/cozy-aio/shard"
)

// APIPath is the versioned path of the JSON API, under the prefix.
const APIPath = "/api/v1"

//go:embed assets
var assets embed.FS

// Node is one node's network, for the bootstrap view.
type Node struct {
	Name    string `json:"name"`
	Network bool   `json:"network"`
	Reason  string `json:"reason,omitempty"`
}

// Replica is this process's part among replicas, and what it sees of
// the others.
type Replica struct {
	ID     string `json:"id,omitempty"`
	Leader bool   `json:"leader"`
	Shards []int  `json:"shards"`
	// Live are the replicas alive, and Holders which one holds each Helm
	// shard, from their Leases; empty when the engine runs alone.
	Live    []string       `json:"live,omitempty"`
	Holders map[int]string `json:"holders,omitempty"`
}

// Source is what the page reads from the engine it serves. Cache, API
// and Metrics are required; a nil func leaves its part of the page out.
type Source struct {
	// Cache holds the informers of the Flux kinds the engine watches.
	Cache cache.Cache
	// API reads what the cache does not hold (Events), reviews tokens and
	// access, and patches "reconcile now"; it is the engine's identity.
	API client.Client
	// Metrics is the engine's registry: the bootstrap phase and remote
	// clusters' figures come from there.
	Metrics prometheus.Gatherer
	// Plans yields the last plans (upgrade preview), in no order; yield
	// must not block.
	Plans iter.Seq[status.Plan]
	// TenantOf names a HelmRelease's tenant on the Helm shards.
	TenantOf func(client.Object) string
	// Queued says where a HelmRelease waits in its tenant's queue
	// (shard.Pool.Queued with the release's "Kind/namespace/name").
	Queued func(tenant, key string) (shard.Place, bool)
	// Item says whether a HelmRelease's work runs, waits for a retry (and
	// until when) or is done (shard.Pool.Item).
	Item func(tenant, key string) (shard.Item, bool)
	// Pool returns the Helm shards' and tenants' figures.
	Pool func() shard.Stats
	// Replica returns this process's leadership and shards.
	Replica func() Replica
	// Nodes returns the nodes' network state while cozy-aio bootstraps
	// a node (bootstrap.Run sets it).
	Nodes func(ctx context.Context) ([]Node, error)
}

// Options configures the page.
type Options struct {
	// Addr is the listener's host:port. Required.
	Addr string
	// Prefix is the path the page is served under, for a reverse proxy
	// ("/cozy-aio"); empty serves it at the root.
	Prefix string
	Source Source
	Logger logr.Logger
}

// Server serves the status page and its JSON API.
type Server struct {
	opts    Options
	prefix  string
	idx     *index
	access  *access
	handler http.Handler
	addr    atomic.Pointer[string]
	started time.Time
	// watchers counts the live connections; at most maxWatchers.
	watchers atomic.Int32
	synced   sync.Map // kind → func() bool
	// lastMetrics is the registry's figures read at metricsAt.
	metricsMu   sync.Mutex
	lastMetrics status.Metrics
	metricsAt   time.Time
}

// maxWatchers bounds the live (server-sent events) connections.
const maxWatchers = 64

var prefixRE = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)*/?$`)

// New returns a page for opts; Start serves it.
func New(opts Options) (*Server, error) {
	if opts.Addr == "" {
		return nil, errors.New("status page: an address is required")
	}
	if opts.Source.Cache == nil || opts.Source.API == nil || opts.Source.Metrics == nil {
		return nil, errors.New("status page: Source.Cache, Source.API and Source.Metrics are required")
	}
	if !prefixRE.MatchString(opts.Prefix) {
		return nil, fmt.Errorf("status page: prefix %q is not a path of plain segments (\"/cozy-aio\")", opts.Prefix)
	}
	s := &Server{opts: opts, prefix: strings.TrimSuffix(opts.Prefix, "/"), idx: newIndex(),
		access: newAccess(opts.Source.API), started: time.Now()}
	s.handler = s.routes()
	return s, nil
}

// NeedLeaderElection: every replica serves its page.
func (s *Server) NeedLeaderElection() bool { return false }

// Addr returns the address the page listens on once started.
func (s *Server) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// URL returns the page's address once started.
func (s *Server) URL() string { return "http://" + s.Addr() + s.prefix + "/" }

// Updates returns how many batches of changes live clients were sent.
func (s *Server) Updates() uint64 {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.updates
}

// Handler serves the page as if on a loopback listener when loopback is
// set, else with tokens required (tests and embedders with their own
// listener).
func (s *Server) Handler(loopback bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, loopback)
	})
}

// Start serves the page until ctx ends, and feeds it from the informers.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		// The page is for people: the engine runs on without it.
		s.opts.Logger.Error(err, "status page: cannot listen; the engine runs on without it", "addr", s.opts.Addr)
		<-ctx.Done()
		return nil
	}
	addr := ln.Addr().String()
	s.addr.Store(&addr)
	loopback := isLoopback(ln.Addr())
	s.opts.Logger.Info("status page", "url", s.URL(), "tokens", !loopback)
	// The page answers at once and fills as each kind's informer syncs
	// (the overview counts the kinds watched): with thousands of objects
	// the first lists take a while, and that is when people look.
	go func() {
		if err := s.watch(ctx); err != nil {
			s.opts.Logger.Error(err, "status page: watching the Flux kinds")
		}
	}()
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, loopback) }),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// watch indexes every Flux kind the engine watches, from its informers.
func (s *Server) watch(ctx context.Context) error {
	for _, kind := range status.Kinds {
		inf, err := s.opts.Source.Cache.GetInformer(ctx, newObject(kind))
		if err != nil {
			// A kind whose CRD is not installed: the page leaves it out.
			s.opts.Logger.V(1).Info("status page: not watching", "kind", kind, "error", err.Error())
			continue
		}
		upsert := func(obj any) {
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			if po, ok := objectOf(o, s.opts.Source.TenantOf); ok {
				s.idx.set(po)
			}
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    upsert,
			UpdateFunc: func(_, obj any) { upsert(obj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				if o, ok := obj.(client.Object); ok {
					s.idx.remove(Ref{kind, o.GetNamespace(), o.GetName()})
				}
			},
		})
		if err != nil {
			return err
		}
		s.synced.Store(kind, reg.HasSynced)
	}
	return nil
}

// isLoopback tells whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// apiError is the JSON body of every API error.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiError{Error: fmt.Sprintf(format, args...)})
}

// serve routes a request: the prefix off, then the page, its assets or
// the API; off loopback every route but the assets needs a user.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, loopback bool) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	path, ok := strings.CutPrefix(r.URL.Path, s.prefix)
	if !ok || (path != "" && !strings.HasPrefix(path, "/")) {
		http.Error(w, "not found: the status page is under "+s.prefix+"/", http.StatusNotFound)
		return
	}
	if path == "" {
		http.Redirect(w, r, s.prefix+"/", http.StatusMovedPermanently)
		return
	}
	if rest, ok := strings.CutPrefix(path, "/assets/"); ok {
		s.serveAsset(w, r, rest)
		return
	}
	v := &viewer{all: loopback, a: s.access}
	if path == APIPath+"/session" {
		s.session(w, r, loopback)
		return
	}
	if !loopback {
		u, err := s.access.authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cozy-aio"`)
			if path == "/" {
				s.servePage(w, http.StatusUnauthorized)
				return
			}
			fail(w, http.StatusUnauthorized, "%s", err.Error())
			return
		}
		v.user = u
	}
	r = r.WithContext(context.WithValue(r.Context(), viewerKey{}, v))
	s.handler.ServeHTTP(w, r)
}

type viewerKey struct{}

func viewerOf(r *http.Request) *viewer { return r.Context().Value(viewerKey{}).(*viewer) }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	p := s.prefix
	mux.HandleFunc("GET "+p+"/{$}", func(w http.ResponseWriter, _ *http.Request) { s.servePage(w, http.StatusOK) })
	mux.HandleFunc("GET "+p+"/overview.txt", s.overviewText)
	mux.HandleFunc("GET "+p+APIPath+"/overview", s.overview)
	mux.HandleFunc("GET "+p+APIPath+"/objects", s.list)
	mux.HandleFunc("GET "+p+APIPath+"/objects/{kind}/{namespace}/{name}", s.detail)
	mux.HandleFunc("POST "+p+APIPath+"/objects/{kind}/{namespace}/{name}/reconcile", s.reconcile)
	mux.HandleFunc("GET "+p+APIPath+"/timeline", s.timeline)
	mux.HandleFunc("GET "+p+APIPath+"/watch", s.watchEvents)
	mux.HandleFunc(p+APIPath+"/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "no such API path: %s (see docs/status-page.md)", r.URL.Path)
	})
	mux.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	})
	return mux
}

func (s *Server) servePage(w http.ResponseWriter, code int) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	page := strings.Replace(string(b), `<base href="/">`, `<base href="`+s.prefix+`/">`, 1)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(page))
}

func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if name == "" || strings.Contains(name, "/") || name == "index.html" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	sub, _ := fs.Sub(assets, "assets")
	if _, err := fs.Stat(sub, name); err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, sub, name)
}

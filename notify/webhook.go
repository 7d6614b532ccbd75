package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// ServerOptions configure a Server. Only Trigger is required.
type ServerOptions struct {
	// Addr is where Start listens. Default: ":9292", Flux's receiver port.
	Addr string
	// Listener, when set, is served instead of listening on Addr.
	Listener net.Listener
	// Trigger requests a reconcile of the resources of Receiver ref. It is
	// called for each verified request.
	Trigger func(ctx context.Context, ref types.NamespacedName) error
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default: 2 MiB.
	MaxBodyBytes int64
	// MaxInFlight bounds the requests handled at once (and so the memory
	// held by bodies); more are answered 429. Default: 32.
	MaxInFlight int
	// RatePerReceiver and BurstPerReceiver limit the requests to one
	// webhook path; Rate and Burst limit all requests. Excess requests are
	// answered 429. Defaults: 5/s with a burst of 20 per path, 50/s with a
	// burst of 100 in all.
	RatePerReceiver, Rate   rate.Limit
	BurstPerReceiver, Burst int
	// ReplayWindow is how long a GitHub or GitLab delivery ID is
	// remembered: a replay of it is answered 409. Default: 10m.
	ReplayWindow time.Duration
	// Registerer receives the metrics. Default: none.
	Registerer prometheus.Registerer
	// Logger logs rejected requests at V(1). Default: discard.
	Logger logr.Logger
}

func (o ServerOptions) withDefaults() ServerOptions {
	if o.Addr == "" {
		o.Addr = ":9292"
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 2 << 20
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 32
	}
	if o.RatePerReceiver <= 0 {
		o.RatePerReceiver = 5
	}
	if o.BurstPerReceiver <= 0 {
		o.BurstPerReceiver = 20
	}
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Burst <= 0 {
		o.Burst = 100
	}
	if o.ReplayWindow <= 0 {
		o.ReplayWindow = 10 * time.Minute
	}
	return o
}

// Server serves Receiver webhooks under /hook/.
type Server struct {
	opts     ServerOptions
	m        *metrics
	all      *rate.Limiter
	inFlight chan struct{}
	replays  *limiter

	mu    sync.RWMutex
	paths map[string]*hook
	refs  map[types.NamespacedName]string
}

type hook struct {
	ref     types.NamespacedName
	rcv     Receiver
	limiter *rate.Limiter
}

// NewServer returns a Server; Start serves it, or mount Handler.
func NewServer(opts ServerOptions) *Server {
	opts = opts.withDefaults()
	return &Server{
		opts:     opts,
		m:        newMetrics(opts.Registerer),
		all:      rate.NewLimiter(opts.Rate, opts.Burst),
		inFlight: make(chan struct{}, opts.MaxInFlight),
		replays:  newLimiter(opts.ReplayWindow, 100000),
		paths:    map[string]*hook{},
		refs:     map[types.NamespacedName]string{},
	}
}

// SetReceiver serves Receiver ref on path (see WebhookPath).
func (s *Server) SetReceiver(ref types.NamespacedName, path string, r Receiver) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.refs[ref]; ok && old != path {
		delete(s.paths, old)
	}
	h, ok := s.paths[path]
	if !ok || h.ref != ref {
		h = &hook{ref: ref, limiter: rate.NewLimiter(s.opts.RatePerReceiver, s.opts.BurstPerReceiver)}
	}
	h.rcv = r
	s.paths[path] = h
	s.refs[ref] = path
}

// DeleteReceiver stops serving Receiver ref.
func (s *Server) DeleteReceiver(ref types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.refs[ref]; ok {
		delete(s.paths, p)
		delete(s.refs, ref)
	}
}

// Handler returns the webhook handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/hook/", s.serve)
	return mux
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	ln := s.opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.opts.Addr); err != nil {
			return fmt.Errorf("webhook server on %s: %w", s.opts.Addr, err)
		}
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
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

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	code, reason := s.handle(r)
	s.m.webhooks.WithLabelValues(strconv.Itoa(code), reason).Inc()
	if code != http.StatusOK {
		s.opts.Logger.V(1).Info("webhook rejected", "path", r.URL.Path, "code", code, "reason", reason)
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, reason+"\n")
}

// handle answers one request: the status code and a short reason (also
// the metric label; it never carries request data).
func (s *Server) handle(r *http.Request) (int, string) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "method not allowed"
	}
	if !s.all.Allow() {
		return http.StatusTooManyRequests, "rate limited"
	}
	s.mu.RLock()
	h, ok := s.paths[r.URL.Path]
	s.mu.RUnlock()
	if !ok {
		return http.StatusNotFound, "not found"
	}
	if !h.limiter.Allow() {
		return http.StatusTooManyRequests, "rate limited"
	}
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	default:
		return http.StatusTooManyRequests, "too many requests in flight"
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, "body too large"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
	if err != nil {
		return http.StatusBadRequest, "unreadable body"
	}
	if int64(len(body)) > s.opts.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, "body too large"
	}
	err = h.rcv.Verify(r.Header, body)
	switch {
	case errors.Is(err, ErrPing):
		return http.StatusOK, "pong"
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, ErrEventNotAllowed):
		return http.StatusBadRequest, "event not allowed"
	case err != nil:
		return http.StatusBadRequest, "bad payload"
	}
	if id := deliveryID(h.rcv.Type, r.Header); id != "" && !s.replays.allow(r.URL.Path+"/"+id) {
		return http.StatusConflict, "replayed delivery"
	}
	if err := s.opts.Trigger(r.Context(), h.ref); err != nil {
		s.opts.Logger.Error(err, "reconcile request failed", "receiver", h.ref.String())
		return http.StatusInternalServerError, "reconcile request failed"
	}
	return http.StatusOK, "ok"
}

// deliveryID is the unique ID the service gives each delivery, if any.
func deliveryID(typ string, h http.Header) string {
	switch typ {
	case ReceiverGitHub:
		return strings.TrimSpace(h.Get("X-GitHub-Delivery"))
	case ReceiverGitLab:
		return strings.TrimSpace(h.Get("X-Gitlab-Event-UUID"))
	}
	return ""
}

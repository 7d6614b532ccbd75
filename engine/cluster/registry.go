package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/egress"
)

// Defaults of RegistryOptions.
const (
	defaultIdleAfter   = 10 * time.Minute
	defaultGenericTTL  = 30 * time.Minute
	defaultDialTimeout = 5 * time.Second
	defaultMaxClusters = 512
)

// RegistryOptions configures a Registry. Local and Build are required.
type RegistryOptions[T any] struct {
	// Local returns the value of the local cluster, the one of an object
	// without spec.kubeConfig. NewRegistry calls it once, and fails with
	// its error; every Get of a nil reference returns that one Cluster.
	Local func() (T, error)
	// Build makes the value of a remote cluster (its clients, its Helm
	// configuration) from its sanitised rest.Config. It must not block on
	// the remote cluster: a cluster that is not reachable yet still gets
	// its value, and its requests fail fast.
	Build func(cfg *rest.Config) (T, error)
	// Close, when set, is called with a remote cluster's value when the
	// registry drops it (idle, or built twice at once), after its
	// connections were closed: to stop what Build started. Default: none.
	Close func(T)
	// Load says what a kubeconfig may use (see LoadOptions). Default: the
	// zero LoadOptions, the safest.
	Load LoadOptions
	// IdleAfter is how long a remote cluster no Get asked for keeps its
	// value and connections. Default: 10 minutes.
	IdleAfter time.Duration
	// GenericTTL is how long the config of a generic-provider ConfigMap,
	// whose token the management cluster issued, is reused before a new
	// token is requested. Default: 30 minutes (tokens live an hour).
	GenericTTL time.Duration
	// DialTimeout bounds each TCP connection to a remote API server, so
	// that a dead cluster fails in seconds, not after the request
	// timeout. Default: 5 seconds.
	DialTimeout time.Duration
	// MaxClusters caps the remote clusters held at once, each with its
	// clients, discovery and metadata caches: past it, the least recently
	// used ones with no request in flight are dropped (a later Get builds
	// them again). It bounds what many kubeconfigs, each cheap to write,
	// cost. Default: 512.
	MaxClusters int
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
}

// Registry keeps one value per remote cluster, keyed by what the object's
// spec.kubeConfig points at: objects that share a kubeconfig Secret share
// their cluster's clients. A changed Secret or ConfigMap (a rotated
// certificate, an edit) replaces its entry: the old one is dropped as soon
// as no request of it is in flight, so a thousand edits leave one entry.
// An entry no Get asked for within IdleAfter is dropped and its
// connections closed. The local cluster is the entry of "no kubeConfig".
// It is safe for concurrent use.
type Registry[T any] struct {
	reader client.Reader
	tokens client.Client
	opts   RegistryOptions[T]
	local  *Cluster[T]

	mu      sync.Mutex
	entries map[string]*entry[T] // by source name
	// retired are replaced entries whose requests may still be in flight.
	retired []*entry[T]
}

type entry[T any] struct {
	cluster  *Cluster[T]
	digest   string // of the source's content
	stats    *counters
	conns    *dialer
	lastUsed time.Time
	expires  time.Time // zero: never (a kubeconfig Secret)
}

// current tells whether e still serves a source whose content has digest.
func (e *entry[T]) current(digest string, now time.Time) bool {
	return e.digest == digest && (e.expires.IsZero() || now.Before(e.expires))
}

// Cluster is a remote cluster as a Registry holds it.
type Cluster[T any] struct {
	// Source names where the cluster's access comes from, as errors and
	// status name it: "Secret ns/name" or "ConfigMap ns/name".
	Source string
	// Host is the remote API server's address.
	Host string
	// Value is what RegistryOptions.Build made for the cluster.
	Value T
}

// NewRegistry returns a Registry that reads kubeconfig Secrets and
// ConfigMaps through reader and requests the generic provider's tokens
// through tokens (both of the management cluster).
func NewRegistry[T any](reader client.Reader, tokens client.Client, opts RegistryOptions[T]) (*Registry[T], error) {
	if opts.Local == nil || opts.Build == nil {
		return nil, errors.New("cluster: RegistryOptions.Local and Build are required")
	}
	if opts.IdleAfter <= 0 {
		opts.IdleAfter = defaultIdleAfter
	}
	if opts.GenericTTL <= 0 {
		opts.GenericTTL = defaultGenericTTL
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = defaultDialTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxClusters <= 0 {
		opts.MaxClusters = defaultMaxClusters
	}
	local, err := opts.Local()
	if err != nil {
		return nil, fmt.Errorf("cluster: the local cluster: %w", err)
	}
	return &Registry[T]{reader: reader, tokens: tokens, opts: opts, local: &Cluster[T]{Value: local},
		entries: map[string]*entry[T]{}}, nil
}

// Get returns the cluster of an object in namespace whose spec.kubeConfig
// is ref; a nil ref is the local cluster (Source "", Value from Local),
// the same Cluster every time.
// Errors name the Secret or ConfigMap and the cause.
func (r *Registry[T]) Get(ctx context.Context, namespace string, ref *meta.KubeConfigReference) (*Cluster[T], error) {
	if ref == nil {
		return r.local, nil
	}
	src, err := r.read(ctx, namespace, ref)
	if err != nil {
		return nil, err
	}
	now := r.opts.Now()
	r.mu.Lock()
	r.sweepLocked(now)
	if e, ok := r.entries[src.name]; ok && e.current(src.key, now) {
		e.lastUsed = now
		r.mu.Unlock()
		return e.cluster, nil
	}
	r.mu.Unlock()
	e, err := r.build(ctx, namespace, src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.name, err)
	}
	e.lastUsed = now
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.entries[src.name]; ok {
		if old.current(src.key, now) {
			// Another Get built it meanwhile: keep one.
			r.drop(e)
			old.lastUsed = now
			return old.cluster, nil
		}
		// An edited source or an expired generic config: actions may
		// still run on the old clients, so they go once idle.
		r.retired = append(r.retired, old)
	}
	r.entries[src.name] = e
	r.sweepLocked(now)
	r.evictLocked(src.name)
	return e.cluster, nil
}

// evictLocked drops the least recently used clusters with no request in
// flight, but keep's, while more than MaxClusters are held.
func (r *Registry[T]) evictLocked(keep string) {
	for len(r.entries) > r.opts.MaxClusters {
		oldest := ""
		for k, e := range r.entries {
			if k == keep || e.stats.inflight.Load() > 0 {
				continue
			}
			if oldest == "" || e.lastUsed.Before(r.entries[oldest].lastUsed) {
				oldest = k
			}
		}
		if oldest == "" {
			return // every other one is in use
		}
		r.drop(r.entries[oldest])
		delete(r.entries, oldest)
	}
}

// source is what a kubeConfig reference points at, read.
type source struct {
	name   string // "Secret ns/name" or "ConfigMap ns/name"
	key    string // digest of the content
	config []byte // the kubeconfig of a Secret
	cm     *corev1.ConfigMap
}

func (r *Registry[T]) read(ctx context.Context, namespace string, ref *meta.KubeConfigReference) (source, error) {
	switch {
	case ref.SecretRef != nil:
		name := fmt.Sprintf("Secret %s/%s", namespace, ref.SecretRef.Name)
		secret := &corev1.Secret{}
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.SecretRef.Name}, secret); err != nil {
			return source{}, fmt.Errorf("reading the kubeConfig %s: %w", name, err)
		}
		data, err := KubeconfigFromSecret(secret, ref.SecretRef.Key)
		if err != nil {
			return source{}, err
		}
		return source{name: name, key: digest(data), config: data}, nil
	case ref.ConfigMapRef != nil:
		name := fmt.Sprintf("ConfigMap %s/%s", namespace, ref.ConfigMapRef.Name)
		cm := &corev1.ConfigMap{}
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.ConfigMapRef.Name}, cm); err != nil {
			return source{}, fmt.Errorf("reading the kubeConfig %s: %w", name, err)
		}
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b []byte
		for _, k := range keys {
			b = fmt.Appendf(b, "%q=%q\n", k, cm.Data[k])
		}
		return source{name: name, key: digest(b), cm: cm}, nil
	}
	return source{}, errors.New("spec.kubeConfig sets neither secretRef nor configMapRef")
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// build loads the source's rest.Config, gives it a dialer whose
// connections the entry closes when it is dropped, and builds the value.
func (r *Registry[T]) build(ctx context.Context, namespace string, src source) (*entry[T], error) {
	var cfg *rest.Config
	var err error
	var expires time.Time
	if src.cm != nil {
		cfg, err = GenericConfig(ctx, r.tokens, namespace, src.cm, r.opts.Load)
		expires = r.opts.Now().Add(r.opts.GenericTTL)
	} else {
		cfg, err = Load(src.config, r.opts.Load)
	}
	if err != nil {
		return nil, err
	}
	// Refused before any work with a message that names the address; the
	// dialer refuses it again at each connection, after resolution.
	if err := r.opts.Load.Destinations.CheckURL(ctx, egress.Endpoint, cfg.Host); err != nil {
		return nil, fmt.Errorf("server %s: %w", cfg.Host, err)
	}
	base := &net.Dialer{Timeout: r.opts.DialTimeout, KeepAlive: 30 * time.Second}
	d := &dialer{d: r.opts.Load.Destinations.Dialer(egress.Endpoint, base), conns: map[net.Conn]struct{}{}}
	stats := &counters{}
	if cfg, err = sharedTransport(cfg, d, stats); err != nil {
		return nil, err
	}
	v, err := r.opts.Build(cfg)
	if err != nil {
		d.closeAll()
		return nil, err
	}
	return &entry[T]{cluster: &Cluster[T]{Source: src.name, Host: cfg.Host, Value: v}, digest: src.key,
		stats: stats, conns: d, expires: expires}, nil
}

// sharedTransport gives cfg one HTTP transport over d, counted in stats,
// that every client built from cfg (or a copy of it, an impersonating one
// too) shares. client-go shares transports between rest.Configs only when
// they have no Dial of their own; with one, each client (and Helm builds
// clients for every action) would open its own connections, each with its
// own TLS handshake. With this, a cluster's requests and watches are
// streams of one HTTP/2 connection. The authentication in cfg (token,
// basic, impersonation) stays in cfg, for client-go to wrap around the
// shared transport. A config whose credentials come from a plugin (exec,
// auth-provider: only with the operator's insecure flag) keeps client-go's
// own transport, on d.
func sharedTransport(cfg *rest.Config, d *dialer, stats *counters) (*rest.Config, error) {
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		cfg.Dial = d.DialContext
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return &countingTransport{next: &withheldTransport{next: rt}, c: stats}
		})
		return cfg, nil
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
	}
	base := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
		DisableCompression:  cfg.DisableCompression,
	})
	out := rest.CopyConfig(cfg)
	out.Transport = &countingTransport{next: &withheldTransport{next: base}, c: stats}
	out.TLSClientConfig = rest.TLSClientConfig{}
	out.Dial, out.Proxy = nil, nil
	return out, nil
}

// drop closes an entry's connections and gives its value to Close.
func (r *Registry[T]) drop(e *entry[T]) {
	e.conns.closeAll()
	if r.opts.Close != nil {
		r.opts.Close(e.cluster.Value)
	}
}

// sweepLocked drops the entries idle for IdleAfter, and the retired ones
// with no request in flight. An entry with a request in flight (a long
// Helm action, a wait's watch) is in use.
func (r *Registry[T]) sweepLocked(now time.Time) {
	r.retired = slices.DeleteFunc(r.retired, func(e *entry[T]) bool {
		if e.stats.inflight.Load() > 0 {
			return false
		}
		r.drop(e)
		return true
	})
	for k, e := range r.entries {
		if e.stats.inflight.Load() > 0 {
			e.lastUsed = now
			continue
		}
		if now.Sub(e.lastUsed) >= r.opts.IdleAfter {
			r.drop(e)
			delete(r.entries, k)
		}
	}
}

// Close drops every remote cluster, in use or not, closing their
// connections and giving their values to RegistryOptions.Close: for the
// end of the process or of the embedding engine. A later Get builds anew.
func (r *Registry[T]) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, e := range r.entries {
		r.drop(e)
		delete(r.entries, k)
	}
	for _, e := range r.retired {
		r.drop(e)
	}
	r.retired = nil
}

// Sweep drops the remote clusters idle for IdleAfter and returns how many
// remain. Get sweeps too; an embedder that runs no Get for long calls it
// to give idle connections back.
func (r *Registry[T]) Sweep() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked(r.opts.Now())
	return len(r.entries) + len(r.retired)
}

// Stats describes one remote cluster a Registry holds.
type Stats struct {
	// Source and Host are the Cluster's.
	Source, Host string
	// Requests counts the requests sent to the cluster's API server, and
	// Errors those that got no response or a 5xx, 401 or 403.
	Requests, Errors uint64
	// LastContact is when the API server last answered; zero if never.
	LastContact time.Time
	// LastUsed is when a Get last returned the cluster.
	LastUsed time.Time
}

// Stats returns the remote clusters the Registry holds, sorted by Source
// (an entry being replaced may appear twice, the older one first).
func (r *Registry[T]) Stats() []Stats {
	r.mu.Lock()
	out := make([]Stats, 0, len(r.entries)+len(r.retired))
	for _, e := range slices.Concat(r.retired, slices.Collect(maps.Values(r.entries))) {
		out = append(out, Stats{Source: e.cluster.Source, Host: e.cluster.Host,
			Requests: e.stats.requests.Load(), Errors: e.stats.errors.Load(),
			LastContact: e.stats.lastContact(), LastUsed: e.lastUsed})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].LastUsed.Before(out[j].LastUsed)
	})
	return out
}

// Len returns how many remote clusters the Registry holds.
func (r *Registry[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries) + len(r.retired)
}

// dialer dials a remote cluster's connections and closes them all when
// its cluster is dropped (client-go keeps no shared transport for a
// rest.Config with its own Dial, so they are this entry's alone).
type dialer struct {
	d      *net.Dialer
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		c.Close()
		return nil, errors.New("cluster: the remote cluster's clients were closed")
	}
	tc := &trackedConn{Conn: c, d: d}
	d.conns[tc] = struct{}{}
	return tc, nil
}

func (d *dialer) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for c := range d.conns {
		c.(*trackedConn).Conn.Close()
	}
	clear(d.conns)
}

type trackedConn struct {
	net.Conn
	d    *dialer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}

// counters count a remote cluster's requests.
type counters struct {
	requests, errors atomic.Uint64
	contact          atomic.Int64 // unix nanoseconds of the last answer
	// inflight counts the requests whose response body is still open.
	inflight atomic.Int64
}

func (c *counters) lastContact() time.Time {
	if n := c.contact.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

type countingTransport struct {
	next http.RoundTripper
	c    *counters
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.requests.Add(1)
	inUse := req.Context().Value(backgroundKey{}) == nil
	if inUse {
		t.c.inflight.Add(1)
	}
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil:
		if inUse {
			t.c.inflight.Add(-1)
		}
		t.c.errors.Add(1)
		return resp, err
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		t.c.errors.Add(1)
	}
	t.c.contact.Store(time.Now().UnixNano())
	if inUse {
		resp.Body = &trackedBody{ReadCloser: resp.Body, c: t.c}
	}
	return resp, nil
}

type backgroundKey struct{}

// Background marks the requests made with ctx as a remote cluster's
// background work, such as a cache's watches that run as long as the
// cluster is held: they are counted, but do not keep the cluster in use,
// so that it is still dropped once no Get asked for it for IdleAfter.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// trackedBody ends an in-flight request when its body is closed.
type trackedBody struct {
	io.ReadCloser
	c    *counters
	once sync.Once
}

func (b *trackedBody) Close() error {
	b.once.Do(func() { b.c.inflight.Add(-1) })
	return b.ReadCloser.Close()
}

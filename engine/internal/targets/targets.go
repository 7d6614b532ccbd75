package targets

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/apply/helm"
	"github.com/cozystack/cozy-aio/engine/cluster"
	"github.com/cozystack/cozy-aio/engine/internal/frame"
	"github.com/cozystack/cozy-aio/health"
	"github.com/cozystack/cozy-aio/internal/egress"
)

// restClientErrorReason is the Ready reason of a HelmRelease whose
// cluster has no client: its kubeConfig cannot be read or is refused
// (helm-controller's reason for the same).
const RESTClientErrorReason = "RESTClientError"

// Options tell the target clusters how to reach a cluster.
type Options struct {
	// Reader and Client read the kubeConfig Secrets and ConfigMaps: the
	// API server directly, and the engine's client.
	Reader client.Reader
	Client client.Client
	// Local holds the engine's own cluster's clients.
	Local *Clients
	// Remote are the operator's settings for remote clusters.
	Remote RemoteOptions
	// Destinations is the egress policy a remote cluster's address passes.
	Destinations egress.Policy
	// HelmOptions are the Helm manager options of a remote cluster, with
	// its own waiter and Helm cache.
	HelmOptions func(waiter *health.Waiter, cache *helm.Cache) helm.Options
}

// RemoteOptions configures the clients of the remote clusters that
// HelmReleases reach through spec.kubeConfig. The zero value works.
type RemoteOptions struct {
	// AllowExec lets kubeconfigs run exec plugins. Default: false, refused.
	AllowExec bool
	// AllowInsecureTLS lets kubeconfigs set insecure-skip-tls-verify.
	// Default: false, refused.
	AllowInsecureTLS bool
	// IdleAfter is how long a remote cluster no reconcile used keeps its
	// clients and connections. Default: 10 minutes.
	IdleAfter time.Duration
	// MaxClusters caps the remote clusters whose clients (and their
	// discovery and metadata caches) are held at once; the least recently
	// used idle ones go first. Default: 512.
	MaxClusters int
	// AllowWorkloadIdentity lets kubeConfig ConfigMaps of the generic
	// provider have the engine mint tokens of their namespace's
	// ServiceAccounts and send them to the ConfigMap's address. Default:
	// false: such objects stall naming the flag. Flux: the
	// ObjectLevelWorkloadIdentity feature gate, off by default.
	AllowWorkloadIdentity bool
}

// Targets are the clusters units deploy to: this one, and the remote ones
// of spec.kubeConfig, each with its clients.
type Targets struct {
	// Registry holds each cluster's clients.
	Registry *cluster.Registry[*Clients]
	opts     Options
}

// New returns the registry of the clusters units deploy to: the local
// cluster's entry holds the engine's own clients, a remote cluster's holds
// its own.
func New(o Options) (*Targets, error) {
	t := &Targets{opts: o}
	ro := o.Remote
	reg, err := cluster.NewRegistry(o.Reader, o.Client, cluster.RegistryOptions[*Clients]{
		Local: func() (*Clients, error) { return o.Local, nil },
		Build: t.remoteClients,
		Close: func(c *Clients) {
			if c.Stop != nil {
				c.Stop()
			}
		},
		Load: cluster.LoadOptions{AllowExec: ro.AllowExec, AllowInsecureTLS: ro.AllowInsecureTLS,
			AllowWorkloadIdentity: ro.AllowWorkloadIdentity, Destinations: o.Destinations, UserAgent: "cozy-aio"},
		IdleAfter:   ro.IdleAfter,
		MaxClusters: ro.MaxClusters,
	})
	if err != nil {
		return nil, err
	}
	t.Registry = reg
	return t, nil
}

// Clients is what the engine keeps for each cluster its units
// deploy to: the Helm manager of its releases, the waiter of its health
// checks and the appliers of its Kustomizations, one per identity.
type Clients struct {
	Cfg      *rest.Config
	Cache    *apply.Cache // the watch cache of the local cluster; nil remote
	Helm     func() (*helm.Manager, error)
	Waiter   func() (*health.Waiter, error)
	Appliers *Appliers
	// probe asks a remote cluster's API server for its version; nil for
	// the local one.
	Probe func(context.Context) error
	// stop ends what the clients of a remote cluster run (its Helm
	// cache's watches) when the registry drops it; nil for the local one.
	Stop func()
}

func (c *Clients) ApplierFor(managers FieldManagers, namespace, serviceAccount string) (*apply.Applier, error) {
	return c.Appliers.ApplierFor(c.Cfg, c.Cache, managers, namespace, serviceAccount)
}

// remoteUnreachable is how long a wait on a remote cluster (a Helm
// action's, a Kustomization's health checks) goes on hearing nothing from
// its API server before it fails: a tenant cluster that dies mid-install
// fails the install in seconds, naming its Secret, and frees the worker,
// instead of holding it for the release's timeout.
const remoteUnreachable = 10 * time.Second

// remoteProbeTimeout bounds the question a reconcile asks a remote cluster
// whose last request got no answer.
const remoteProbeTimeout = 5 * time.Second

// remoteClients builds the clients of a remote cluster. Its Helm manager
// has the local one's holder and fencing (the shard Leases live in the
// management cluster), its own waiter and its own Helm cache (metadata
// watches of the release records and of the kinds Helm asks about);
// Kustomizations' appliers have no watch cache and read the remote
// cluster's objects from its API server.
func (t *Targets) remoteClients(cfg *rest.Config) (*Clients, error) {
	// Waits watch what they wait on; a request timeout would end the
	// watch, so the waiter's config has none (its dials still time out).
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	waiter, err := health.NewWaiter(wcfg, health.WaiterOptions{Unreachable: remoteUnreachable})
	if err != nil {
		return nil, err
	}
	// Helm's existence checks and history reads answered from metadata
	// watches of the remote cluster, as the local cluster's are: a remote
	// release costs the requests a local one does. The watches start with
	// the first question about a resource and stop when the registry
	// drops the cluster.
	cache, err := helm.NewCache(wcfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(cluster.Background(context.Background()))
	go func() { _ = cache.Start(ctx) }()
	mgr, err := helm.New(cfg, t.opts.HelmOptions(waiter, cache))
	if err != nil {
		cancel()
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	rc := dc.RESTClient()
	probe := func(ctx context.Context) error { return rc.Get().AbsPath("/version").Do(ctx).Error() }
	return &Clients{Cfg: cfg, Appliers: &Appliers{}, Stop: cancel, Probe: probe,
		Helm:   func() (*helm.Manager, error) { return mgr, nil },
		Waiter: func() (*health.Waiter, error) { return waiter, nil },
	}, nil
}

// ClusterOf returns the cluster a unit with kubeConfig ref (nil: this
// cluster) deploys to, or the outcome that says why it has none.
func (t *Targets) ClusterOf(ctx context.Context, namespace string, ref *meta.KubeConfigReference, self frame.Ref) (*cluster.Cluster[*Clients], frame.Outcome, bool) {
	c, err := t.Registry.Get(ctx, namespace, ref)
	if err == nil {
		return c, frame.Outcome{}, true
	}
	err = fmt.Errorf("%s: spec.kubeConfig: %w", self, err)
	var fe *cluster.FieldError
	var pe *cluster.UnsupportedProviderError
	var we *cluster.WorkloadIdentityDisabledError
	_, refused := egress.Refused(err)
	if errors.As(err, &fe) || errors.As(err, &pe) || errors.As(err, &we) || refused {
		// No retry makes a refused kubeconfig acceptable; a change to the
		// Secret or ConfigMap does, and so does a spec change.
		return nil, frame.Stalled(RESTClientErrorReason, err), false
	}
	return nil, frame.Failed(RESTClientErrorReason, err), false
}

// HelmManagerOf returns the Helm manager of the cluster obj installs to
// and that cluster's Source ("" for this cluster), or the outcome that
// says why it has none.
func (t *Targets) HelmManagerOf(ctx context.Context, obj *helmv2.HelmRelease, self frame.Ref) (*helm.Manager, string, frame.Outcome, bool) {
	c, out, ok := t.ClusterOf(ctx, obj.Namespace, obj.Spec.KubeConfig, self)
	if !ok {
		return nil, "", out, false
	}
	mgr, err := c.Value.Helm()
	if err != nil {
		return nil, "", frame.Failed(meta.ReconciliationFailedReason, err), false
	}
	// A remote cluster is asked for its version before its Helm cache is
	// believed, one request per reconcile: a release of a cluster that went
	// away must not be confirmed Ready from what the cache last saw
	// (helm-controller reads the release from the cluster every time). The
	// cache's watches notice a dead server only when they next reconnect.
	if c.Value.Probe != nil {
		pctx, cancel := context.WithTimeout(ctx, remoteProbeTimeout)
		err := c.Value.Probe(pctx)
		cancel()
		if err != nil {
			err = RemoteError(c.Source, fmt.Errorf("%s: the API server is unreachable: %w", self, err))
			return nil, "", frame.Failed(meta.ReconciliationFailedReason, err), false
		}
	}
	return mgr, c.Source, frame.Outcome{}, true
}

// remoteError names the kubeConfig Secret or ConfigMap of a remote
// cluster (source, as cluster.Cluster.Source) in err when err says that
// the cluster could not be talked to: no answer, a certificate not
// trusted (both *url.Error), credentials refused (401) or without the
// rights asked for (403). The fix is in that Secret or in its user's
// rights, so the message says which. Other errors (a chart's template,
// an invalid object) and those of this cluster (source "") are returned
// as they are. Wrapping keeps err's kind: a failure that may pass is
// still retried.
func RemoteError(source string, err error) error {
	if err == nil || source == "" {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || unreachableText(err.Error()) {
		return fmt.Errorf("cluster %s: %w", source, err)
	}
	return err
}

// unreachableMarkers are what an error flattened to text (Helm builds
// some of its errors with %v, such as "unable to build kubernetes objects
// from release manifest: unable to recognize ...: Get ...: dial tcp ...")
// says when the server gave no answer or was not trusted.
var unreachableMarkers = []string{
	"dial tcp ", "connection refused", "i/o timeout", "no such host", "x509: ", "tls: ",
	"net/http: TLS handshake timeout", "context deadline exceeded (Client.Timeout",
}

func unreachableText(msg string) bool {
	for _, m := range unreachableMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// kubeConfigGone tells whether err says the kubeConfig Secret or ConfigMap
// of a unit no longer exists.
func KubeConfigGone(ref *meta.KubeConfigReference, err error) bool {
	return ref != nil && apierrors.IsNotFound(err)
}

// Sweep closes the remote clusters no release used for their idle
// time, also while no release asks for any cluster.
func (t *Targets) Sweep(ctx context.Context) error {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The engine stops: every remote cluster's connections and
			// watches go with it.
			t.Registry.Close()
			return nil
		case <-tick.C:
			t.Registry.Sweep()
		}
	}
}

// kubeConfigName names what a spec.kubeConfig points at.
func KubeConfigName(ref *meta.KubeConfigReference) string {
	switch {
	case ref == nil:
		return ""
	case ref.SecretRef != nil:
		return "Secret/" + ref.SecretRef.Name
	case ref.ConfigMapRef != nil:
		return "ConfigMap/" + ref.ConfigMapRef.Name
	}
	return "?"
}

// clusterCollector exports the remote clusters the engine holds clients
// for, by the Secret or ConfigMap they come from.
type clusterCollector struct {
	clusters                            *cluster.Registry[*Clients]
	open, requests, errors, lastContact *prometheus.Desc
}

func NewCollector(c *cluster.Registry[*Clients]) *clusterCollector {
	return &clusterCollector{clusters: c,
		open: prometheus.NewDesc("cozy_aio_remote_clusters", "Remote clusters (spec.kubeConfig) the engine holds clients for.", nil, nil),
		requests: prometheus.NewDesc("cozy_aio_remote_cluster_requests_total",
			"Requests sent to a remote cluster's API server, by the kubeConfig Secret or ConfigMap.", []string{"cluster"}, nil),
		errors: prometheus.NewDesc("cozy_aio_remote_cluster_errors_total",
			"Requests to a remote cluster's API server that got no answer, a 5xx, 401 or 403.", []string{"cluster"}, nil),
		lastContact: prometheus.NewDesc("cozy_aio_remote_cluster_last_contact_timestamp_seconds",
			"When a remote cluster's API server last answered (0: never).", []string{"cluster"}, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.requests, c.errors, c.lastContact} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.clusters.Stats()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(len(stats)))
	seen := map[string]bool{}
	for i := len(stats) - 1; i >= 0; i-- { // the newest entry of a Source
		s := stats[i]
		if seen[s.Source] {
			continue
		}
		seen[s.Source] = true
		var last float64
		if !s.LastContact.IsZero() {
			last = float64(s.LastContact.UnixNano()) / 1e9
		}
		// No host label: the address is the tenant's to choose, and a
		// label value must never carry a string a tenant wrote freely.
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(s.Requests), s.Source)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(s.Errors), s.Source)
		ch <- prometheus.MustNewConstMetric(c.lastContact, prometheus.GaugeValue, last, s.Source)
	}
}

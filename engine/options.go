package engine

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/apply"
	"github.com/cozystack/cozy-aio/engine/internal/notifications"
	"github.com/cozystack/cozy-aio/engine/internal/replicas"
	"github.com/cozystack/cozy-aio/engine/internal/targets"
)

// DefaultKustomizeFieldManager is Options.KustomizeFieldManager's default:
// the field manager of Flux's kustomize-controller.
const DefaultKustomizeFieldManager = "kustomize-controller"

// Options configures an Engine. The zero value runs every reconciler with
// defaults that suit a single node.
type Options struct {
	// DataDir holds the artifact store. Default: $TMPDIR/cozy-aio.
	DataDir string
	// ArtifactAddr is where the artifact HTTP server listens.
	// Default: 127.0.0.1:9090 (loopback; anything wider is explicit).
	ArtifactAddr string
	// ArtifactBaseURL is the URL prefix written in status, as Flux's
	// --storage-adv-addr: set it to an address that outlives the process,
	// such as a Service in front of replicas. Each replica that does not
	// lead then keeps in its store the current artifact of every source
	// whose status names this address (fetched or rebuilt in the
	// background as status changes, checked against the digest), so that
	// its artifact server answers for any of them. A request never starts
	// that work: one for an artifact not stored yet waits a few seconds at
	// most, then gets a 503 with Retry-After.
	// Default: http://<ArtifactAddr>, with the port the server bound when
	// ArtifactAddr asks for any free one (":0").
	ArtifactBaseURL string
	// WebhookAddr serves the Receiver webhooks (/hook/<digest>). Default:
	// "" (off: the static pod shares the host's network, so a listener is
	// opened only when asked for).
	WebhookAddr string
	// Notify tunes how events reach Alerts. The zero value works.
	Notify NotifyOptions
	// HealthAddr serves /healthz, /readyz and /metrics. Default: "" (off);
	// the cozy-aio binary sets it.
	HealthAddr string
	// StatusPage serves the status page. Default: off; the cozy-aio
	// binary serves it on 127.0.0.1:9441.
	StatusPage StatusPageOptions
	// Concurrency is the number of workers per source and Kustomization
	// reconciler. Default: 4.
	Concurrency int
	// Shards is the number of Helm shards; 0 chooses it from the number
	// of HelmReleases. Default: 0 (auto).
	Shards int
	// ShardWorkers is the number of Helm workers per shard. Default: 4.
	ShardWorkers int
	// HolderID names this process: on the Helm releases it writes, so that
	// a restarted process recognises its own dead incarnation's pending
	// releases, and in its Leases when Replicas are enabled. Default: the
	// host name.
	HolderID string
	// Replicas lets several engines share one cluster through Leases.
	// Default: off, this engine alone does everything.
	Replicas ReplicaOptions
	// UpgradeHold is the hold policy of a HelmRelease or Kustomization
	// without the cozy-aio.cozystack.io/upgrade-hold annotation: "never"
	// (the default: every change runs at once, as with Flux; its plan is
	// still made and reported), "risky" (a change whose plan names a risk
	// waits for an approval) or "always". See docs/upgrade-preview.md.
	UpgradeHold string
	// DisableUpgradePlans makes no plan of HelmRelease installs and
	// upgrades and of Kustomizations' new desired states, and so holds
	// none. Default: false, each is planned.
	DisableUpgradePlans bool
	// TenantLabel names the label that gives a HelmRelease's tenant.
	// Default: "" (the namespace is the tenant).
	TenantLabel string
	// Restricted forbids cross-namespace references and remote kustomize
	// bases, and applies tenant objects as DefaultServiceAccount when an
	// object names none. Default: false.
	Restricted bool
	// AllowRemoteBases lets kustomizations reference remote bases (Git or
	// HTTP URLs). Default: false. Restricted mode always forbids them.
	AllowRemoteBases bool
	// StrictSubstitutions makes a post-build ${var} without a value and
	// without a default a build error, as kustomize-controller's
	// StrictPostBuildSubstitutions feature gate. Default: false.
	StrictSubstitutions bool
	// WatchConfigsSelector is the label selector of the ConfigMaps and
	// Secrets whose changes reconcile at once the HelmReleases and
	// Kustomizations that read them (valuesFrom, postBuild.substituteFrom,
	// decryption.secretRef, kubeConfig), as Flux's
	// --watch-configs-label-selector; WatchAllConfigs selects every one,
	// WatchNoConfigs none. Default: DefaultWatchConfigsSelector
	// (reconcile.fluxcd.io/watch=Enabled).
	WatchConfigsSelector string
	// DefaultServiceAccount is used in restricted mode. Default: "default".
	DefaultServiceAccount string
	// RemoteClusters says what the kubeconfigs of spec.kubeConfig may
	// use and how long an idle remote cluster keeps its clients.
	// Default: the zero value, the safest (no exec plugins, no
	// insecure-skip-tls-verify; Flux's --insecure-kubeconfig-exec and
	// --insecure-kubeconfig-tls set its fields).
	RemoteClusters RemoteClusterOptions
	// MaxReleaseRecordBytes bounds a Helm release record once
	// decompressed: records are Secrets anyone who may write a Secret in a
	// storage namespace can write. A release whose record inflates past it
	// ends Ready=False naming the Secret. Default:
	// helm.DefaultMaxReleaseRecordBytes (64 MiB).
	MaxReleaseRecordBytes int64
	// Destinations adjusts the destination policy of tenant-chosen
	// addresses (see DestinationOptions). Default: link-local, unspecified
	// and, for anything that receives credentials, loopback refused.
	Destinations DestinationOptions
	// Kinds limits the reconcilers to these kinds (Flux's names:
	// GitRepository, OCIRepository, Bucket, HelmRepository, HelmChart,
	// Kustomization, HelmRelease, ArtifactGenerator); the engine still
	// watches the others, so that their readiness wakes what depends on
	// them. For example ArtifactGenerator alone runs the engine beside
	// Flux's controllers as their source-watcher. Default: every kind.
	Kinds []string
	// InstallCRDs server-side applies the embedded Flux CRDs at start.
	// Default: false.
	InstallCRDs bool
	// FieldManager is the server-side apply field manager of what the
	// engine writes but Kustomizations' objects (CRDs it installs,
	// ExternalArtifacts). Default: apply.DefaultFieldManager ("cozy-aio").
	FieldManager string
	// KustomizeFieldManager is the field manager Kustomizations apply
	// their objects with. Default: DefaultKustomizeFieldManager,
	// kustomize-controller's, so that a switch from Flux (or back) writes
	// no object that is up to date. Objects an earlier cozy-aio applied as
	// FieldManager are handed over to it, once each (apply.Options.HandOver).
	KustomizeFieldManager string
	// Gate, when set, is asked before an object is reconciled; while it
	// returns false the object waits with a condition that says why. The
	// bootstrap package uses it to hold everything but the network phase.
	// The engine re-asks whenever Wake is called. Default: always allowed.
	Gate func(ctx context.Context, obj client.Object) (allowed bool, reason string)
	// ReadyzDetail, when set, adds a line to the /readyz answer, such as
	// the bootstrap phase. Default: none.
	ReadyzDetail func() string
	// Registry collects the engine's metrics. Default: controller-runtime's
	// global registry, which also holds its workqueue metrics.
	Registry *prometheus.Registry
	// Logger is the engine's logger. Default: controller-runtime's. New
	// passes on no level above V(7): client-go logs request and response
	// bodies, Secrets among them, at V(8) and above.
	Logger logr.Logger
	// DefaultInterval is used for objects whose interval is zero.
	// Default: 10m.
	DefaultInterval time.Duration
	// Profiling serves Go's pprof profiles under /debug/pprof/ on
	// HealthAddr. Default: false.
	Profiling bool
	// KubeAPIQPS and KubeAPIBurst are the client-side rate limit used when
	// the rest.Config passed to New sets none (QPS 0). client-go's own
	// default, 5 requests per second, would hold a thousand Helm releases
	// for half an hour; the API server's priority and fairness protects it
	// instead. Defaults: 500 and 1000.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// ProgressAfter is how long a HelmRelease's Helm action runs, or the
	// release waits in its shard's queue, before the engine writes
	// Reconciling=True and Ready=Unknown saying so ("Running 'install'
	// action with timeout of 5m0s", or reason Queued with the shard, the
	// position and why). Work done sooner costs no extra write. Negative:
	// never. Default: 2s.
	ProgressAfter time.Duration
	// HelmIndexMaxSize and HelmChartMaxSize refuse a larger Helm
	// repository index or chart archive, as Flux's --helm-index-max-size
	// and --helm-chart-max-size. Defaults: 50 MiB and 10 MiB.
	HelmIndexMaxSize, HelmChartMaxSize int64
	// GeneratorMemoryBytes is the memory that ArtifactGenerator builds
	// share for their outputs, all builds at once (generate.Budget). An
	// output that does not fit in what is left is composed in a temporary
	// directory instead, as source-watcher composes every output: the same
	// artifact, slower. Negative: none, every output is composed on disk.
	// Default: generate.DefaultMemoryBytes (256 MiB).
	GeneratorMemoryBytes int64

	// privateExtraction gives every ArtifactGenerator reconcile source
	// trees of its own instead of the shared ones (extractcache.go): the
	// benchmark's peer. Default: false, shared.
	privateExtraction bool
}

func (o Options) withDefaults() Options {
	if o.DataDir == "" {
		o.DataDir = filepath.Join(os.TempDir(), "cozy-aio")
	}
	if o.ArtifactAddr == "" {
		o.ArtifactAddr = "127.0.0.1:9090"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.ShardWorkers <= 0 {
		o.ShardWorkers = 4
	}
	if o.DefaultServiceAccount == "" {
		o.DefaultServiceAccount = "default"
	}
	if o.WatchConfigsSelector == "" {
		o.WatchConfigsSelector = DefaultWatchConfigsSelector
	}
	if o.FieldManager == "" {
		o.FieldManager = apply.DefaultFieldManager
	}
	if o.KustomizeFieldManager == "" {
		o.KustomizeFieldManager = DefaultKustomizeFieldManager
	}
	if o.DefaultInterval <= 0 {
		o.DefaultInterval = 10 * time.Minute
	}
	if o.HolderID == "" {
		o.HolderID, _ = os.Hostname()
	}
	o.Replicas = o.Replicas.WithDefaults()
	if o.ProgressAfter == 0 {
		o.ProgressAfter = 2 * time.Second
	}
	if o.KubeAPIQPS <= 0 {
		o.KubeAPIQPS = 500
	}
	if o.KubeAPIBurst <= 0 {
		o.KubeAPIBurst = max(1000, int(o.KubeAPIQPS))
	}
	return o
}

// ReplicaOptions configure replicas: leader election and Helm shards
// held through Leases. The zero value is off.
type ReplicaOptions = replicas.Options

// RemoteClusterOptions configures the clients of the remote clusters that
// HelmReleases reach through spec.kubeConfig. The zero value works.
type RemoteClusterOptions = targets.RemoteOptions

// DestinationOptions adjusts the destination policy that every address a
// tenant chooses passes: remote clusters' servers, generic providers'
// addresses, notification Providers' addresses and proxies and foreign
// artifacts' URLs must not be link-local (cloud metadata), unspecified or
// the node's loopback; sources' URLs must not be link-local or
// unspecified. The zero value is that default.
type DestinationOptions struct {
	// Allow lets these ranges through although the default refuses them,
	// such as 127.0.0.0/8 where tenant clusters or receivers listen on
	// loopback. Default: none.
	Allow []netip.Prefix
	// Deny refuses these ranges too, for every address a tenant chooses,
	// whatever Allow says. Default: none.
	Deny []netip.Prefix
}

// NotifyOptions tune how events reach Alerts. The zero value works.
type NotifyOptions = notifications.Options

package engine

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configures an Engine. The zero value runs every reconciler with
// defaults that suit a single node.
type Options struct {
	// DataDir holds the artifact store. Default: $TMPDIR/cozy-aio.
	DataDir string
	// ArtifactAddr is where the artifact HTTP server listens.
	// Default: 127.0.0.1:9090 (loopback; anything wider is explicit).
	ArtifactAddr string
	// ArtifactBaseURL is the URL prefix written in status. Default:
	// http://<ArtifactAddr>.
	ArtifactBaseURL string
	// HealthAddr serves /healthz, /readyz and /metrics. Default: "" (off);
	// the cozy-aio binary sets it.
	HealthAddr string
	// Concurrency is the number of workers per source and Kustomization
	// reconciler. Default: 4.
	Concurrency int
	// Shards is the number of Helm shards; 0 chooses it from the number
	// of HelmReleases. Default: 0 (auto).
	Shards int
	// ShardWorkers is the number of Helm workers per shard. Default: 4.
	ShardWorkers int
	// HolderID names this process on the Helm releases it writes, so that
	// a restarted process recognises its own dead incarnation's pending
	// releases. Default: the host name.
	HolderID string
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
	// DefaultServiceAccount is used in restricted mode. Default: "default".
	DefaultServiceAccount string
	// InstallCRDs server-side applies the embedded Flux CRDs at start.
	// Default: false.
	InstallCRDs bool
	// FieldManager is the server-side apply field manager.
	// Default: "cozy-aio".
	FieldManager string
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
	// Logger is the engine's logger. Default: controller-runtime's.
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
}

func (o Options) withDefaults() Options {
	if o.DataDir == "" {
		o.DataDir = filepath.Join(os.TempDir(), "cozy-aio")
	}
	if o.ArtifactAddr == "" {
		o.ArtifactAddr = "127.0.0.1:9090"
	}
	if strings.HasSuffix(o.ArtifactAddr, ":0") {
		// Resolve "any free port" now, so that the URLs written in status
		// name the port the server will listen on.
		if ln, err := net.Listen("tcp", o.ArtifactAddr); err == nil {
			o.ArtifactAddr = ln.Addr().String()
			ln.Close()
		}
	}
	if o.ArtifactBaseURL == "" {
		o.ArtifactBaseURL = "http://" + o.ArtifactAddr
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
	if o.FieldManager == "" {
		o.FieldManager = "cozy-aio"
	}
	if o.DefaultInterval <= 0 {
		o.DefaultInterval = 10 * time.Minute
	}
	if o.KubeAPIQPS <= 0 {
		o.KubeAPIQPS = 500
	}
	if o.KubeAPIBurst <= 0 {
		o.KubeAPIBurst = max(1000, int(o.KubeAPIQPS))
	}
	return o
}

// WithDefaults returns the options with every zero field set to its
// default, as New uses them.
func (o Options) WithDefaults() Options { return o.withDefaults() }

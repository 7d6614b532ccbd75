package apply

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/cozystack/cozy-aio/health"
)

// DefaultFieldManager is the server-side apply field manager used when
// Options.FieldManager is empty.
const DefaultFieldManager = "cozy-aio"

// ServiceAccount names a Kubernetes ServiceAccount.
type ServiceAccount struct {
	Namespace string
	Name      string
}

// Username returns the API server user name of the account:
// system:serviceaccount:<namespace>:<name>.
func (sa ServiceAccount) Username() string {
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// Options configures an Applier. The zero value works.
type Options struct {
	// FieldManager is the server-side apply field manager. Default:
	// DefaultFieldManager.
	FieldManager string
	// HandOver names earlier field managers of the same objects (an
	// earlier cozy-aio's, for example): before an object that one of them
	// applied is first written, its managed fields are renamed to
	// FieldManager with one JSON patch, as Flux's ssa hands fields over,
	// so that a field later removed from the manifest is still removed
	// from the object, and the apply that follows writes nothing when the
	// object is otherwise up to date. Change.Detail says so. Default: none.
	HandOver []string
	// Impersonate, when its Name is set, makes every request of the Applier
	// act as that ServiceAccount, so the API server enforces its RBAC.
	// Default: the identity of the rest.Config.
	Impersonate ServiceAccount
	// Concurrency is how many objects are written in parallel. Default: 32.
	Concurrency int
	// QPS and Burst replace the client-side rate limit of the rest.Config.
	// Default: 2000 and 4000; a negative QPS disables the limiter.
	QPS   float32
	Burst int
	// Cache lets the Applier skip writes that would change nothing. It is
	// shared by Appliers and started by the caller (see Cache). Default:
	// none, and every object is sent to the API server.
	Cache *Cache
}

// Applier server-side applies objects, prunes them and reports drift. It is
// safe for concurrent use.
type Applier struct {
	opts    Options
	mapper  meta.RESTMapper
	rest    rest.Interface
	client  client.Client
	manager *ssa.ResourceManager
	// identity distinguishes what this Applier wrote in a shared Cache.
	identity string
}

// New returns an Applier that talks to the API server of cfg.
func New(cfg *rest.Config, opts Options) (*Applier, error) {
	if opts.FieldManager == "" {
		opts.FieldManager = DefaultFieldManager
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	cfg = rest.CopyConfig(cfg)
	switch {
	case opts.QPS < 0:
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	case opts.QPS == 0:
		cfg.QPS, cfg.Burst = 2000, 4000
	default:
		cfg.QPS, cfg.Burst = opts.QPS, max(opts.Burst, int(opts.QPS))
	}
	if opts.Impersonate.Name != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: opts.Impersonate.Username()}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the REST mapper: %w", err)
	}
	c, err := client.New(cfg, client.Options{HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	rcfg := rest.CopyConfig(cfg)
	rcfg.APIPath = ""
	rcfg.GroupVersion = nil
	rcfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rcfg.ContentType = "application/json"
	rc, err := rest.UnversionedRESTClientForConfigAndClient(rcfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the REST client: %w", err)
	}
	a := &Applier{
		opts:     opts,
		mapper:   mapper,
		rest:     rc,
		client:   c,
		manager:  ssa.NewResourceManager(c, nil, ssa.Owner{Field: opts.FieldManager}),
		identity: opts.FieldManager + "\x00" + cfg.Impersonate.UserName,
	}
	a.manager.SetConcurrency(opts.Concurrency)
	return a, nil
}

// Client returns the controller-runtime client the Applier uses, with its
// identity (impersonated or not).
func (a *Applier) Client() client.Client { return a.client }

// RESTMapper returns the Applier's REST mapper.
func (a *Applier) RESTMapper() meta.RESTMapper { return a.mapper }

// mapping returns the REST mapping of ref's kind, naming the kind and the
// missing CRD when the API server does not serve it.
func (a *Applier) mapping(ref health.ObjectRef) (*meta.RESTMapping, error) {
	m, err := a.mapper.RESTMapping(schema.GroupKind{Group: ref.Group, Kind: ref.Kind}, ref.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("%s: %w", ref, &UnknownKindError{GVK: ref.GroupVersionKind(), Err: err})
		}
		return nil, fmt.Errorf("%s: mapping the kind: %w", ref, err)
	}
	return m, nil
}

// path returns the URL path of the object ref under mapping m.
func objectPath(m *meta.RESTMapping, ref health.ObjectRef) string {
	var b strings.Builder
	if m.Resource.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(m.Resource.Group)
		b.WriteByte('/')
	}
	b.WriteString(m.Resource.Version)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		b.WriteString("/namespaces/")
		b.WriteString(ref.Namespace)
	}
	b.WriteByte('/')
	b.WriteString(m.Resource.Resource)
	b.WriteByte('/')
	b.WriteString(ref.Name)
	return b.String()
}

// UnknownKindError means the API server does not serve a kind: for a custom
// resource, its CustomResourceDefinition is missing.
type UnknownKindError struct {
	GVK schema.GroupVersionKind
	Err error
}

func (e *UnknownKindError) Error() string {
	gv := e.GVK.GroupVersion().String()
	return fmt.Sprintf("kind %s (%s) is not served by the API server: its CustomResourceDefinition is missing or not yet established", e.GVK.Kind, gv)
}

func (e *UnknownKindError) Unwrap() error { return e.Err }

// describe wraps an API error of the Applier with the object and, for a
// denial, the identity that was denied.
func (a *Applier) describe(ref health.ObjectRef, verb string, err error) error {
	if apierrors.IsForbidden(err) {
		who := "the applier's identity"
		if a.opts.Impersonate.Name != "" {
			who = "impersonated " + a.opts.Impersonate.Username()
		}
		return fmt.Errorf("%s: %s forbidden by RBAC for %s: %w", ref, verb, who, err)
	}
	return fmt.Errorf("%s: %s failed: %w", ref, verb, err)
}

func isNotFound(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Code == http.StatusNotFound
}

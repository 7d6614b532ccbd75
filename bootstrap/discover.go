package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Candidate kinds, in the default discovery order.
const (
	CandidateExplicit   = "explicit"
	CandidateEnv        = "service-env"
	CandidateKubePrism  = "kubeprism"
	CandidateLocal      = "localhost"
	CandidateKubeconfig = "kubeconfig"
	// CandidateEndpointSlice tries DiscoverOptions.Fallbacks, the addresses
	// remembered from the kubernetes EndpointSlice (see apiServerEndpoints).
	CandidateEndpointSlice = "endpointslice"
)

// DefaultOrder is the order in which Run tries API server candidates.
var DefaultOrder = []string{CandidateExplicit, CandidateEnv, CandidateKubePrism, CandidateLocal, CandidateKubeconfig, CandidateEndpointSlice}

// DiscoverOptions configures how Run finds the API server. The zero value
// tries the default candidates with in-cluster or admin.conf credentials.
type DiscoverOptions struct {
	// Server is an explicit API server URL. Default: none.
	Server string
	// Kubeconfig is a kubeconfig file. It supplies credentials for every
	// candidate, and its own server is the "kubeconfig" candidate.
	// Default: /etc/kubernetes/admin.conf when it exists.
	Kubeconfig string
	// Order lists the candidate kinds to try. Default: DefaultOrder.
	Order []string
	// KubePrismAddress is KubePrism's address. Default: localhost:7445.
	KubePrismAddress string
	// LocalAddress is the local API server's address. Default: localhost:6443.
	LocalAddress string
	// ProbeTimeout bounds each probe. Default: 2s.
	ProbeTimeout time.Duration
	// Getenv reads the environment. Default: os.Getenv.
	Getenv func(string) string
	// Fallbacks are API server URLs remembered from an earlier run's
	// kubernetes EndpointSlice. Default: none.
	Fallbacks []string
	// ServiceAccountDir holds token and ca.crt for in-cluster credentials.
	// Default: /var/run/secrets/kubernetes.io/serviceaccount.
	ServiceAccountDir string
}

func (o DiscoverOptions) withDefaults() DiscoverOptions {
	if len(o.Order) == 0 {
		o.Order = DefaultOrder
	}
	if o.KubePrismAddress == "" {
		o.KubePrismAddress = "localhost:7445"
	}
	if o.LocalAddress == "" {
		o.LocalAddress = "localhost:6443"
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.ServiceAccountDir == "" {
		o.ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	}
	if o.Kubeconfig == "" {
		if _, err := os.Stat("/etc/kubernetes/admin.conf"); err == nil {
			o.Kubeconfig = "/etc/kubernetes/admin.conf"
		}
	}
	return o
}

// attempt is one candidate that discover tried.
type attempt struct {
	Kind string
	Host string
	Err  error
}

func (a attempt) String() string {
	if a.Err == nil {
		return fmt.Sprintf("%s %s: ok", a.Kind, a.Host)
	}
	return fmt.Sprintf("%s %s: %v", a.Kind, a.Host, a.Err)
}

// endpoint is the API server that discover chose.
type endpoint struct {
	// Kind is the candidate kind that answered, e.g. "kubeprism".
	Kind string
	// Config reaches the API server at Config.Host.
	Config *rest.Config
	// Attempts lists every candidate tried, in order, the chosen one last.
	Attempts []attempt
}

// errNoAPIServer means no candidate answered.
var errNoAPIServer = errors.New("no API server reachable")

// discoveryError lists every candidate tried, on one line.
type discoveryError struct{ Attempts []attempt }

func (e *discoveryError) Error() string {
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = a.String()
	}
	return fmt.Sprintf("%v; tried: %s", errNoAPIServer, strings.Join(parts, "; "))
}

func (e *discoveryError) Unwrap() error { return errNoAPIServer }

// discover finds the API server without the pod network. It tries each
// candidate in order with a short probe and returns the first that answers
// as an API server (any HTTP answer to /version, even 401, proves one is
// there). Credentials come from the kubeconfig, else the service account.
func discover(ctx context.Context, opts DiscoverOptions) (*endpoint, error) {
	opts = opts.withDefaults()
	base, baseErr := credentials(opts)
	var attempts []attempt
	for _, kind := range opts.Order {
		for _, host := range candidateHosts(kind, opts, base) {
			if baseErr != nil {
				attempts = append(attempts, attempt{Kind: kind, Host: host, Err: baseErr})
				continue
			}
			cfg := rest.CopyConfig(base)
			cfg.Host = host
			err := probe(ctx, cfg, opts.ProbeTimeout)
			attempts = append(attempts, attempt{Kind: kind, Host: host, Err: err})
			if err == nil {
				return &endpoint{Kind: kind, Config: cfg, Attempts: attempts}, nil
			}
		}
	}
	return nil, &discoveryError{Attempts: attempts}
}

func candidateHosts(kind string, opts DiscoverOptions, base *rest.Config) []string {
	switch kind {
	case CandidateExplicit:
		if opts.Server != "" {
			return []string{opts.Server}
		}
	case CandidateEnv:
		h, p := opts.Getenv("KUBERNETES_SERVICE_HOST"), opts.Getenv("KUBERNETES_SERVICE_PORT")
		if h != "" && p != "" {
			return []string{"https://" + net.JoinHostPort(h, p)}
		}
	case CandidateKubePrism:
		return []string{"https://" + opts.KubePrismAddress}
	case CandidateLocal:
		return []string{"https://" + opts.LocalAddress}
	case CandidateEndpointSlice:
		return opts.Fallbacks
	case CandidateKubeconfig:
		if opts.Kubeconfig != "" && base != nil && base.Host != "" {
			return []string{base.Host}
		}
	}
	return nil
}

// credentials builds the client credentials shared by every candidate.
func credentials(opts DiscoverOptions) (*rest.Config, error) {
	if opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", opts.Kubeconfig, err)
		}
		return cfg, nil
	}
	token := opts.ServiceAccountDir + "/token"
	if _, err := os.Stat(token); err != nil {
		return nil, fmt.Errorf("no credentials: no kubeconfig given, none at /etc/kubernetes/admin.conf, and no service account token at %s", token)
	}
	cfg := &rest.Config{BearerTokenFile: token}
	if _, err := os.Stat(opts.ServiceAccountDir + "/ca.crt"); err == nil {
		cfg.TLSClientConfig.CAFile = opts.ServiceAccountDir + "/ca.crt"
	}
	return cfg, nil
}

func probe(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: rt, Timeout: timeout}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

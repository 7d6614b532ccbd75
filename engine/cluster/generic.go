package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/cozy-aio/internal/egress"
)

// ProviderGeneric is the kubeConfig ConfigMap provider that authenticates
// with a ServiceAccount token of the management cluster.
const ProviderGeneric = "generic"

// genericCluster is what a generic-provider ConfigMap says.
type genericCluster struct {
	// host is the canonical address, https://host:port.
	host string
	// caData is the PEM CA bundle; empty means the system roots.
	caData []byte
	// audiences are the token's audiences.
	audiences []string
	// serviceAccount names a ServiceAccount in the object's namespace.
	serviceAccount string
}

// GenericConfig returns a rest.Config for the remote cluster that cm, a
// kubeConfig ConfigMap of the generic provider in namespace, describes. It
// asks the management cluster, through c, for a token of the ConfigMap's
// ServiceAccount in namespace, and refuses the token if the management
// cluster itself would accept it: the address is the tenant's choice, so a
// token valid at home must never be sent there. c needs create on
// serviceaccounts/token and on tokenreviews.
//
// Minting a token on a tenant's request is the operator's choice, as
// Flux's ObjectLevelWorkloadIdentity feature gate: without
// opts.AllowWorkloadIdentity, GenericConfig returns a
// *WorkloadIdentityDisabledError and asks for no token. The address must
// pass opts.Destinations as an egress.Endpoint before a token is asked for.
//
// The token lives as long as the API server's default (one hour): build a
// fresh config for each reconcile. Of opts, only UserAgent, Timeout,
// AllowWorkloadIdentity and Destinations apply.
func GenericConfig(ctx context.Context, c client.Client, namespace string, cm *corev1.ConfigMap, opts LoadOptions) (*rest.Config, error) {
	if cm == nil {
		return nil, errors.New("kubeConfig ConfigMap is nil")
	}
	id := fmt.Sprintf("ConfigMap/%s/%s", namespace, cm.Name)
	if cm.Namespace != "" && cm.Namespace != namespace {
		return nil, fmt.Errorf("%s: the ConfigMap is in namespace %q, not the object's", id, cm.Namespace)
	}
	if !opts.AllowWorkloadIdentity {
		return nil, fmt.Errorf("%s: %w", id, &WorkloadIdentityDisabledError{})
	}
	g, err := parseGeneric(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	if err := opts.Destinations.CheckURL(ctx, egress.Endpoint, g.host); err != nil {
		return nil, fmt.Errorf("%s: key %q: %w", id, meta.KubeConfigKeyAddress, err)
	}
	token, err := requestToken(ctx, c, namespace, g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	cfg := opts.newConfig()
	cfg.Host = g.host
	cfg.CAData = g.caData
	cfg.BearerToken = token
	return cfg, nil
}

// parseGeneric reads a generic-provider ConfigMap's data. The keys and their
// defaults are Flux's (meta.KubeConfigReference), except serviceAccountName:
// Flux falls back to the controller's own ServiceAccount, and handing the
// engine's token to an address a tenant chose is not something to default to.
func parseGeneric(data map[string]string) (genericCluster, error) {
	switch p := data[meta.KubeConfigKeyProvider]; p {
	case ProviderGeneric:
	case "":
		return genericCluster{}, keyError(meta.KubeConfigKeyProvider, errors.New("required"))
	default:
		return genericCluster{}, &UnsupportedProviderError{Provider: p}
	}
	var g genericCluster
	address := data[meta.KubeConfigKeyAddress]
	host, err := parseAddress(address)
	if err != nil {
		return g, keyError(meta.KubeConfigKeyAddress, err)
	}
	g.host = host
	if ca := data[meta.KubeConfigKeyCACert]; ca != "" {
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(ca)) {
			return g, keyError(meta.KubeConfigKeyCACert, errors.New("holds no PEM certificate"))
		}
		g.caData = []byte(ca)
	}
	g.audiences = parseAudiences(data[meta.KubeConfigKeyAudiences], address)
	g.serviceAccount = data[meta.KubeConfigKeyServiceAccountName]
	if g.serviceAccount == "" {
		return g, keyError(meta.KubeConfigKeyServiceAccountName, errors.New("required"))
	}
	if errs := validation.IsDNS1123Subdomain(g.serviceAccount); len(errs) > 0 {
		return g, keyError(meta.KubeConfigKeyServiceAccountName, errors.New(strings.Join(errs, "; ")))
	}
	return g, nil
}

func keyError(key string, err error) error {
	return fmt.Errorf("key %q: %w", key, err)
}

// parseAddress returns the canonical form https://host:port of an API server
// address, as Flux does: no scheme means https, only https is allowed, the
// port defaults to 443, and the path is dropped.
func parseAddress(address string) (string, error) {
	if address == "" {
		return "", errors.New("required")
	}
	raw := address
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("scheme %q is not allowed: only https is", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%q has no host", address)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return "https://" + strings.ToLower(net.JoinHostPort(u.Hostname(), port)), nil
}

// parseAudiences splits the audiences value on commas and white space; with
// none, the audience is the address as written, as in Flux.
func parseAudiences(value, address string) []string {
	auds := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(auds) == 0 {
		return []string{address}
	}
	return auds
}

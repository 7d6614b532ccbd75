package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cozystack/cozy-aio/internal/egress"
)

const (
	// defaultTimeout is Flux's default for KubeConfigOptions.Timeout.
	defaultTimeout = 30 * time.Second
	// defaultQPS and defaultBurst replace Flux's flowcontrol probe, which
	// asks the remote server whether it runs API Priority and Fairness and
	// lifts the client limit if it does. Load does no I/O, so it cannot ask;
	// these are ten times client-go's 5/10, enough for a large apply, and
	// every supported Kubernetes version protects itself with APF anyway.
	defaultQPS   = 50
	defaultBurst = 100
)

// LoadOptions configures Load and GenericConfig. The zero value is the
// safest setting and works.
type LoadOptions struct {
	// AllowExec lets users[].exec plugins through. Default: false, refused,
	// because an exec plugin runs a command of the tenant's choosing inside
	// the engine's container. Flux: --insecure-kubeconfig-exec.
	AllowExec bool
	// AllowInsecureTLS lets clusters[].insecure-skip-tls-verify: true
	// through. Default: false, refused, because it lets anyone on the path
	// read the credentials sent to the remote server. Flux:
	// --insecure-kubeconfig-tls.
	AllowInsecureTLS bool
	// UserAgent identifies the engine to the remote API server. Default:
	// empty, which leaves client-go's default user agent.
	UserAgent string
	// Timeout bounds each request to the remote API server. Default: 30s,
	// as Flux's KubeConfigOptions; a negative value means no timeout.
	Timeout time.Duration
	// AllowWorkloadIdentity lets generic-provider ConfigMaps have the
	// engine mint ServiceAccount tokens and send them to the ConfigMap's
	// address. Default: false, refused with a
	// *WorkloadIdentityDisabledError. Flux: the ObjectLevelWorkloadIdentity
	// feature gate, off by default.
	AllowWorkloadIdentity bool
	// Destinations is the policy remote API server addresses (kubeconfig
	// server, generic address) pass as egress.Endpoint addresses.
	// Default: the zero Policy, which refuses link-local, unspecified and
	// loopback addresses.
	Destinations egress.Policy
}

// newConfig returns the rest.Config fields that come from the options rather
// than from the kubeconfig.
func (o LoadOptions) newConfig() *rest.Config {
	timeout := o.Timeout
	switch {
	case timeout == 0:
		timeout = defaultTimeout
	case timeout < 0:
		timeout = 0
	}
	return &rest.Config{UserAgent: o.UserAgent, Timeout: timeout, QPS: defaultQPS, Burst: defaultBurst}
}

// Load parses an untrusted kubeconfig and returns a sanitised rest.Config for
// its current-context. A refused field anywhere in the file, in the current
// context's entries or not, refuses the whole file with a *FieldError: a
// file that holds a refused field was not written for this engine, and
// checking every entry keeps the rule simple to state. Load does no I/O.
func Load(data []byte, opts LoadOptions) (*rest.Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("kubeconfig is empty")
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	if cfg.CurrentContext == "" {
		return nil, errors.New("kubeconfig has no current-context")
	}
	// Before ClientConfig, which reads tokenFile and opens the certificate
	// files while it builds and validates the config.
	if err := checkFields(cfg, opts); err != nil {
		return nil, err
	}
	in, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig current-context %q: %w", cfg.CurrentContext, err)
	}
	return sanitise(in, opts), nil
}

// checkFields refuses the fields an untrusted kubeconfig must not use. It
// walks the entries in name order so that the same file always gives the
// same error.
func checkFields(cfg *clientcmdapi.Config, opts LoadOptions) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if err := checkCluster(name, cfg.Clusters[name], opts); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		if err := checkUser(name, cfg.AuthInfos[name], opts); err != nil {
			return err
		}
	}
	// Flux's own check, behind ours: a file field that a later Flux learns
	// to refuse is refused here too, if without a field name, before
	// checkUser and checkCluster learn it.
	if err := runtimeclient.ValidateKubeConfig(cfg); err != nil {
		return fmt.Errorf("kubeconfig refused: %w", err)
	}
	return nil
}

func checkCluster(name string, c *clientcmdapi.Cluster, opts LoadOptions) error {
	path := "clusters[" + name + "]"
	switch {
	case c == nil:
		return &FieldError{Field: path, Reason: "the entry is empty"}
	case c.CertificateAuthority != "":
		return &FieldError{Field: path + ".certificate-authority",
			Reason: "it names a file on the engine's machine; embed the CA as certificate-authority-data"}
	case c.InsecureSkipTLSVerify && !opts.AllowInsecureTLS:
		return &FieldError{Field: path + ".insecure-skip-tls-verify",
			Reason: "TLS verification of remote API servers cannot be disabled; set certificate-authority-data"}
	}
	return nil
}

func checkUser(name string, u *clientcmdapi.AuthInfo, opts LoadOptions) error {
	path := "users[" + name + "]"
	switch {
	case u == nil:
		return &FieldError{Field: path, Reason: "the entry is empty"}
	case u.Exec != nil && !opts.AllowExec:
		return &FieldError{Field: path + ".exec",
			Reason: "exec plugins would run a command on the engine's machine; use a token or a client certificate"}
	case u.AuthProvider != nil:
		return &FieldError{Field: path + ".auth-provider",
			Reason: "auth-provider plugins are not supported; use a token or a client certificate"}
	case u.TokenFile != "":
		return &FieldError{Field: path + ".tokenFile",
			Reason: "it names a file on the engine's machine; embed the token as token"}
	case u.ClientCertificate != "":
		return &FieldError{Field: path + ".client-certificate",
			Reason: "it names a file on the engine's machine; embed it as client-certificate-data"}
	case u.ClientKey != "":
		return &FieldError{Field: path + ".client-key",
			Reason: "it names a file on the engine's machine; embed it as client-key-data"}
	}
	return nil
}

// sanitise copies what a remote client needs from the config clientcmd
// built, as Flux's runtime/client.KubeConfig does, so that nothing else of
// the tenant's (impersonation, auth-provider, file paths, a custom
// transport) reaches the client. Unlike Flux it sends no flowcontrol probe.
func sanitise(in *rest.Config, opts LoadOptions) *rest.Config {
	out := opts.newConfig()
	out.Host = in.Host
	out.APIPath = in.APIPath
	out.DisableCompression = in.DisableCompression
	out.TLSClientConfig = rest.TLSClientConfig{
		ServerName: in.ServerName,
		CAData:     in.CAData,
		CertData:   in.CertData,
		KeyData:    in.KeyData,
	}
	out.Proxy = in.Proxy
	out.Username = in.Username
	out.Password = in.Password
	out.BearerToken = in.BearerToken
	if opts.AllowInsecureTLS {
		out.Insecure = in.Insecure
	}
	if opts.AllowExec {
		out.ExecProvider = in.ExecProvider
	}
	return out
}

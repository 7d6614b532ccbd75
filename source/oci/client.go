package oci

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/cozystack/cozy-aio/source"
)

// ErrLayerNotFound means the manifest has no layer of the selected media type.
var ErrLayerNotFound = errors.New("no layer matches the selector")

// repository opens an oras-go client for url ("oci://host/repo" or
// "host/repo") with the registry's transport and credentials.
// The returned function closes the transport's idle connections once the
// caller is done with the client.
func repository(repoURL string, reg Registry) (*remote.Repository, func(), error) {
	ref := strings.TrimPrefix(repoURL, "oci://")
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, nil, fmt.Errorf("oci %s: %w", repoURL, err)
	}
	repo.PlainHTTP = reg.PlainHTTP
	tr, release, err := reg.transport()
	if err != nil {
		return nil, nil, err
	}
	cred, err := reg.credentials(repo.Reference.Registry)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("oci %s: %w", repoURL, err)
	}
	repo.Client = &auth.Client{
		Client: &http.Client{Transport: tr},
		Cache:  auth.NewCache(),
		Credential: func(_ context.Context, host string) (auth.Credential, error) {
			return cred(host), nil
		},
	}
	return repo, release, nil
}

// Repository opens an oras-go client for the repository repoURL
// ("oci://host/repo" or "host/repo") that reaches it as Fetch does, with
// reg's transport and credentials, for other clients of the same
// registry, such as signature verification.
func Repository(repoURL string, reg Registry) (*remote.Repository, error) {
	repo, _, err := repository(repoURL, reg)
	return repo, err
}

// credentials returns what to present to each registry host: Username
// and Password to the repository's registry, else DockerConfigJSON's
// entry for the host.
func (reg Registry) credentials(registry string) (func(host string) auth.Credential, error) {
	creds, err := parseDockerConfig(reg.DockerConfigJSON)
	if err != nil {
		return nil, err
	}
	return func(host string) auth.Credential {
		if reg.Username != "" && host == registry {
			return auth.Credential{Username: reg.Username, Password: reg.Password}
		}
		return creds[host]
	}, nil
}

// Client returns what Fetch reaches reg with for a repository on the
// registry host:port registry: the HTTP transport (TLS config, proxy,
// retries of transient failures) and the credential for each host (the
// zero Credential is anonymous), for other clients of the same registry,
// such as signature verification.
func (reg Registry) Client(registry string) (http.RoundTripper, func(host string) auth.Credential, error) {
	tr, _, err := reg.transport()
	if err != nil {
		return nil, nil, err
	}
	cred, err := reg.credentials(registry)
	if err != nil {
		return nil, nil, err
	}
	return tr, cred, nil
}

// sharedTransport serves every registry without a TLS config, a proxy or
// a Dial hook of its own, so that pulls reuse connections. A hook gets a
// transport of its own: two hooks cannot be told equal, and a connection
// one of them allowed must not serve a caller the other one speaks for.
// Like every transport here, it retries what oras-go deems transient
// (timeouts, 429, 5xx).
var sharedTransport = retry.NewTransport(http.DefaultTransport.(*http.Transport).Clone())

// transport returns the HTTP transport for reg and a function that closes
// its idle connections, for a caller done with a transport of its own.
func (reg Registry) transport() (http.RoundTripper, func(), error) {
	if reg.TLSConfig == nil && reg.ProxyURL == "" && reg.Dial == nil {
		return sharedTransport, func() {}, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if reg.Dial != nil {
		tr.DialContext = reg.Dial
	}
	if reg.TLSConfig != nil {
		tr.TLSClientConfig = reg.TLSConfig.Clone()
	}
	if reg.ProxyURL != "" {
		pu, err := url.Parse(reg.ProxyURL)
		if err != nil {
			return nil, nil, fmt.Errorf("proxy URL: %w", err)
		}
		tr.Proxy = http.ProxyURL(pu)
	}
	return retry.NewTransport(tr), tr.CloseIdleConnections, nil
}

// parseDockerConfig reads the "auths" of a docker config.json into
// credentials per host:port. Keys may be URLs ("https://host/v1/").
func parseDockerConfig(b []byte) (map[string]auth.Credential, error) {
	creds := map[string]auth.Credential{}
	if len(b) == 0 {
		return creds, nil
	}
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%w: docker config JSON: %w", source.ErrAuth, err)
	}
	for key, a := range cfg.Auths {
		c := auth.Credential{Username: a.Username, Password: a.Password, RefreshToken: a.IdentityToken, AccessToken: a.RegistryToken}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			user, pass, ok := strings.Cut(string(dec), ":")
			if err != nil || !ok {
				return nil, fmt.Errorf("%w: docker config JSON: malformed auth for %s", source.ErrAuth, key)
			}
			c.Username, c.Password = user, pass
		}
		creds[registryHost(key)] = c
	}
	return creds, nil
}

func registryHost(key string) string {
	if strings.Contains(key, "://") {
		if u, err := url.Parse(key); err == nil {
			return u.Host
		}
	}
	h, _, _ := strings.Cut(key, "/")
	if h == "index.docker.io" || h == "docker.io" {
		return "registry-1.docker.io"
	}
	return h
}

// fetcher classifies a registry's failures. An error that already carries
// its kind, such as the digest mismatch Fetch finds itself, names it once
// (not every fetcher does: Git's message for a host key mismatch names its
// kind twice).
var fetcher = source.Fetcher{Prefix: "oci ", Protocol: registryKind, KindOnce: true}

// registryKind names what oras-go reports: the registry's error response,
// its own not-found and digest errors. A tls.RecordHeaderError and an
// HTTPS request answered in plain HTTP are unreachable for registries too;
// see source.Kind.
func registryKind(err error) error {
	var resp *errcode.ErrorResponse
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden),
		errors.Is(err, auth.ErrBasicCredentialNotFound):
		return source.ErrAuth
	case errors.Is(err, errdef.ErrNotFound), errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound:
		return source.ErrRefNotFound
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrInvalidDescriptorSize),
		errors.Is(err, content.ErrTrailingData), errors.Is(err, source.ErrDigestMismatch):
		return source.ErrDigestMismatch
	case errors.As(err, &recErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return source.ErrUnreachable
	}
	return nil
}

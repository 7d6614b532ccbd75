package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cozystack/cozy-aio/internal/redact"
)

// Provider types a Provider may have.
const (
	TypeGeneric      = "generic"
	TypeGenericHMAC  = "generic-hmac"
	TypeSlack        = "slack"
	TypeMSTeams      = "msteams"
	TypeDiscord      = "discord"
	TypeAlertmanager = "alertmanager"
	TypeGitHub       = "github"
	TypeGitLab       = "gitlab"
	TypeGitea        = "gitea"
)

// ProviderTypes lists the Provider types the package sends to.
var ProviderTypes = []string{TypeGeneric, TypeGenericHMAC, TypeSlack, TypeMSTeams, TypeDiscord,
	TypeAlertmanager, TypeGitHub, TypeGitLab, TypeGitea}

// Provider says where and how events are sent (Flux's Provider spec with
// its Secrets resolved).
type Provider struct {
	// Type is one of ProviderTypes.
	Type string
	// Address is the URL events are posted to; for the Git providers, the
	// repository's URL (https://github.com/org/repo).
	Address string
	// Channel and Username are passed to the chat providers.
	Channel, Username string
	// Token is the HMAC key (generic-hmac), the bot token (slack) or the
	// API token (github, gitlab, gitea).
	Token string
	// Password is used with Username for basic auth where a provider
	// takes it.
	Password string
	// Headers are added to each request (the Secret's "headers" key).
	Headers map[string]string
	// Proxy is the HTTP proxy URL. Default: none (not the environment's).
	Proxy *url.URL
	// TLS configures the connection (CA, client certificate). Default:
	// the system's CAs.
	TLS *tls.Config
	// Timeout bounds each request. Default: 15s, as Flux.
	Timeout time.Duration
	// UID identifies the Provider object; the commit status providers use
	// it in the status context, as Flux does.
	UID string
	// Suspend stops the Provider from sending anything.
	Suspend bool
}

// UnsupportedTypeError is returned for a Provider type the package does not
// send to.
type UnsupportedTypeError struct{ Type string }

func (e *UnsupportedTypeError) Error() string {
	return fmt.Sprintf("provider type %q is not supported", e.Type)
}

// sender posts one event.
type sender interface {
	post(ctx context.Context, ev *Event) error
}

// newSender validates p and builds its sender, whose connections dial
// opens (nil: a plain net.Dialer).
func newSender(p Provider, dial dialFunc) (sender, error) {
	if p.Address == "" {
		return nil, errors.New("no address: set spec.address or the key 'address' in spec.secretRef")
	}
	u, err := url.ParseRequestURI(p.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid address: want an http(s) URL")
	}
	c := newHTTPClient(p, dial)
	switch p.Type {
	case TypeGeneric:
		return &generic{c: c, url: p.Address, headers: p.Headers}, nil
	case TypeGenericHMAC:
		if p.Token == "" {
			return nil, errors.New("generic-hmac needs the key 'token' in spec.secretRef")
		}
		return &generic{c: c, url: p.Address, headers: p.Headers, hmacKey: []byte(p.Token)}, nil
	case TypeSlack:
		return &slack{c: c, url: p.Address, channel: p.Channel, username: p.Username, token: p.Token}, nil
	case TypeDiscord:
		return newDiscord(c, u, p.Username)
	case TypeMSTeams:
		return &msteams{c: c, url: p.Address}, nil
	case TypeAlertmanager:
		return &alertmanager{c: c, url: p.Address, username: p.Username, password: p.Password, token: p.Token}, nil
	case TypeGitHub, TypeGitLab, TypeGitea:
		return newCommitStatus(c, p, u)
	}
	return nil, &UnsupportedTypeError{Type: p.Type}
}

// dialFunc is the type of DispatcherOptions.Dial.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// newHTTPClient builds the client a provider sends with: its own
// transport (proxy, CA, client certificate, dial), no redirects to other
// hosts.
func newHTTPClient(p Provider, dial dialFunc) *httpClient {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.TLS != nil {
		tlsConfig = p.TLS.Clone()
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		// With a proxy, the transport dials the proxy: the hook sees
		// the address a connection really goes to.
		DialContext:         dial,
		Proxy:               nil,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if p.Proxy != nil {
		tr.Proxy = http.ProxyURL(p.Proxy)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	return &httpClient{secrets: providerSecrets(p), c: &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > 0 && req.URL.Host != via[0].URL.Host {
				return errors.New("redirect to another host refused")
			}
			return nil
		},
	}}
}

type httpClient struct {
	c *http.Client
	// secrets are masked in transport errors, in whatever text carries
	// them.
	secrets [][]byte
}

// providerSecrets are the values of p that come from its Secret.
func providerSecrets(p Provider) [][]byte {
	s := [][]byte{[]byte(p.Address), []byte(p.Token), []byte(p.Password)}
	for _, v := range p.Headers {
		s = append(s, []byte(v))
	}
	if p.Proxy != nil {
		if pw, ok := p.Proxy.User.Password(); ok {
			s = append(s, []byte(pw))
		}
	}
	return s
}

// StatusError is a provider's answer other than 2xx. Temporary answers
// (429 and 5xx) are retried; others are not. It holds the code only: the
// address is the tenant's choice, and an answer's body may echo the
// request's credentials, so it is never kept.
type StatusError struct {
	Code int
}

func (e *StatusError) Error() string {
	return strings.TrimSpace(fmt.Sprintf("POST to provider address: provider answered %d %s", e.Code, http.StatusText(e.Code)))
}

// Temporary tells whether retrying may help.
func (e *StatusError) Temporary() bool {
	return e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// postJSON posts v as JSON to rawURL; set adds headers.
func (h *httpClient) postJSON(ctx context.Context, rawURL string, v any, set func(r *http.Request, body []byte)) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return redact.Error(fmt.Errorf("POST to provider address: %w", err), h.secrets...)
	}
	req.Header.Set("Content-Type", "application/json")
	if set != nil {
		set(req, body)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return redact.Error(fmt.Errorf("POST to provider address: %w", err), h.secrets...)
	}
	defer resp.Body.Close()
	// Drained for the connection's reuse, and not read: see StatusError.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

package helmrepo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// Client fetches indexes and charts from Helm chart repositories. It is
// safe for concurrent use; one Client serves every repository of a
// process.
type Client struct {
	opts ClientOptions

	indexes *lru[*parsedIndex]
	charts  *lru[[]byte]

	mu         sync.Mutex
	validators map[string]validator
	flights    map[string]*chartFlight
}

// validator is what an index's last response said about its content.
type validator struct {
	digest, etag, lastModified string
}

// NewClient returns a Client with the given bounds.
func NewClient(opts ClientOptions) *Client {
	if opts.IndexCacheEntries == 0 {
		opts.IndexCacheEntries = 4
	}
	if opts.IndexCacheBytes == 0 {
		opts.IndexCacheBytes = 64 << 20
	}
	if opts.ChartCacheBytes == 0 {
		opts.ChartCacheBytes = 64 << 20
	}
	return &Client{
		opts:       opts,
		indexes:    newLRU[*parsedIndex](opts.IndexCacheEntries, opts.IndexCacheBytes),
		charts:     newLRU[[]byte](-1, opts.ChartCacheBytes),
		validators: map[string]validator{},
		flights:    map[string]*chartFlight{},
	}
}

// Forget drops what the client remembers about obj's index, for an object
// that was deleted.
func (c *Client) Forget(obj source.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.validators {
		if strings.HasPrefix(k, obj.String()+"\x00") {
			delete(c.validators, k)
		}
	}
}

// sharedTransport serves every repository without a TLS config or a Dial
// hook of its own, so that fetches reuse connections. A hook gets a
// transport of its own: two hooks cannot be told equal, and a connection
// one of them allowed must not serve a caller the other one speaks for.
var sharedTransport = http.DefaultTransport.(*http.Transport).Clone()

// httpClient returns a client for opts and a function that releases its
// connections.
func httpClient(opts Options) (*http.Client, func()) {
	if opts.TLSConfig == nil && opts.Dial == nil {
		return &http.Client{Transport: sharedTransport}, func() {}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if opts.Dial != nil {
		tr.DialContext = opts.Dial
	}
	if opts.TLSConfig != nil {
		tr.TLSClientConfig = opts.TLSConfig.Clone()
	}
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

// get sends a GET to u, with basic auth when withCreds, and returns the
// response of a 2xx or 304, or a classified error.
func get(ctx context.Context, u string, opts Options, withCreds bool, header http.Header) (*http.Response, func(), error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, redact.Error(fmt.Errorf("%s: %w", u, err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "cozy-aio")
	if withCreds && (opts.Username != "" || opts.Password != "") {
		req.SetBasicAuth(opts.Username, opts.Password)
	}
	hc, release := httpClient(opts)
	resp, err := hc.Do(req)
	if err != nil {
		release()
		return nil, nil, fetcher.Classify(ctx, u, err)
	}
	done := func() { resp.Body.Close(); release() }
	switch {
	case resp.StatusCode == http.StatusNotModified, resp.StatusCode/100 == 2:
		return resp, done, nil
	}
	done()
	return nil, nil, statusError(u, resp.StatusCode)
}

func statusError(u string, code int) error {
	msg := fmt.Sprintf("GET %s: %d %s", redact.String(u), code, http.StatusText(code))
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: %w", msg, source.ErrAuth)
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w", msg, source.ErrRefNotFound)
	}
	return errors.New(msg)
}

// fetcher classifies a transport error, redacted with the URL. HTTP
// statuses are statusError's.
var fetcher = source.Fetcher{Prefix: "GET ", Protocol: httpKind, Redact: true}

// httpKind counts a tls.RecordHeaderError as unreachable for chart
// repositories too; see source.Kind.
func httpKind(err error) error {
	var recErr tls.RecordHeaderError
	if errors.As(err, &recErr) {
		return source.ErrUnreachable
	}
	return nil
}

// readBody reads at most max bytes of a response body, failing with
// source.ErrTooLarge beyond, and before reading anything when the
// Content-Length already says so. what names the content and its URL,
// limit the option that sets max.
func readBody(resp *http.Response, max int64, what, limit string) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the limit of %d bytes (%s): %w", what, resp.ContentLength, max, limit, source.ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is more than the limit of %d bytes (%s): %w", what, max, limit, source.ErrTooLarge)
	}
	return b, nil
}

// sameHost reports whether u is on the host (and port) of base.
func sameHost(base, u string) bool {
	b, err1 := url.Parse(base)
	c, err2 := url.Parse(u)
	return err1 == nil && err2 == nil && strings.EqualFold(b.Host, c.Host)
}

package helmrepo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// ErrInvalidChart means an archive is not the Helm chart it was expected
// to be.
var ErrInvalidChart = errors.New("invalid chart archive")

// chartFlight is one chart download that others wait for.
type chartFlight struct {
	done chan struct{}
	data []byte
	err  error
}

// ChartURL returns the absolute URL of a chart version: its first URL,
// resolved against the repository URL when relative.
func ChartURL(repoURL string, cv *repo.ChartVersion) (string, error) {
	if len(cv.URLs) == 0 {
		return "", fmt.Errorf("%w: chart %s %s has no URL in the index", ErrInvalidIndex, cv.Name, cv.Version)
	}
	return repo.ResolveReferenceURL(repoURL, cv.URLs[0])
}

// DownloadChart returns the archive of a chart version of the repository
// at repoURL. The repository's credentials go to a chart URL on another
// host only with opts.PassCredentials. When the index gives the archive's
// digest, the archive must have it. Downloads of one archive with the
// same credentials are shared: the first caller downloads, the others
// wait for it, and the archive stays in memory within the client's bound
// (see Shared).
func (c *Client) DownloadChart(ctx context.Context, repoURL string, cv *repo.ChartVersion, opts Options) ([]byte, error) {
	u, err := ChartURL(repoURL, cv)
	if err != nil {
		return nil, err
	}
	withCreds := opts.PassCredentials || sameHost(repoURL, u)
	return c.Shared(ctx, chartKey(u, cv.Digest, opts, withCreds), func(ctx context.Context) ([]byte, error) {
		b, err := download(ctx, u, cv, opts, withCreds)
		if err != nil {
			return nil, err
		}
		if _, err := VerifyChart(b, cv.Name, cv.Version); err != nil {
			return nil, fmt.Errorf("chart %s: %w", redact.String(u), err)
		}
		return b, nil
	})
}

// Shared returns the content known by key: from memory when it was
// fetched lately, else from fetch, which runs once for all the callers
// that ask for key meanwhile. The key must name everything the content
// depends on, credentials included. Content within the client's bound
// stays in memory.
func (c *Client) Shared(ctx context.Context, key string, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	if b, ok := c.charts.get(key); ok {
		return b, nil
	}
	c.mu.Lock()
	f, inFlight := c.flights[key]
	if !inFlight {
		f = &chartFlight{done: make(chan struct{})}
		c.flights[key] = f
	}
	c.mu.Unlock()
	if inFlight {
		select {
		case <-f.done:
			return f.data, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.data, f.err = fetch(ctx)
	if f.err == nil {
		c.charts.put(key, f.data, int64(len(f.data)))
	}
	c.mu.Lock()
	delete(c.flights, key)
	c.mu.Unlock()
	close(f.done)
	return f.data, f.err
}

func download(ctx context.Context, u string, cv *repo.ChartVersion, opts Options, withCreds bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	resp, done, err := get(ctx, u, opts, withCreds, nil)
	if err != nil {
		if !withCreds && errors.Is(err, source.ErrAuth) {
			return nil, fmt.Errorf("%w (the chart is on another host than the repository, and credentials go there only with passCredentials)", err)
		}
		return nil, err
	}
	defer done()
	b, err := readBody(resp, opts.maxChartSize(), "chart "+redact.String(u), "MaxChartSize")
	if err != nil {
		return nil, err
	}
	if want := strings.TrimPrefix(cv.Digest, "sha256:"); want != "" && !strings.EqualFold(want, source.SHA256Hex(b)) {
		return nil, fmt.Errorf("chart %s: %w: archive is sha256:%s, the index says %s", redact.String(u), source.ErrDigestMismatch, source.SHA256Hex(b), cv.Digest)
	}
	return b, nil
}

// chartKey identifies a download: the URL, the digest the index gives and
// the credentials sent, so that an archive fetched with one repository's
// credentials is never handed to a caller without them.
func chartKey(u, digest string, opts Options, withCreds bool) string {
	h := sha256.New()
	if withCreds {
		fmt.Fprintf(h, "%s\x00%s\x00", opts.Username, opts.Password)
	}
	if opts.TLSConfig != nil {
		for _, c := range opts.TLSConfig.Certificates {
			for _, der := range c.Certificate {
				h.Write(der)
			}
		}
	}
	return fmt.Sprintf("%s\x00%s\x00%x", u, digest, h.Sum(nil))
}

// VerifyChart loads an archive with Helm's loader and checks that it is
// the chart name; version, when set, must be its version. It returns the
// chart's metadata.
func VerifyChart(data []byte, name, version string) (*chartv2.Metadata, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidChart, err)
	}
	md := ch.Metadata
	if md == nil || md.Name != name {
		got := ""
		if md != nil {
			got = md.Name
		}
		return nil, fmt.Errorf("%w: Chart.yaml names chart %q, want %q", ErrInvalidChart, got, name)
	}
	if version != "" && md.Version != version {
		return nil, fmt.Errorf("%w: Chart.yaml of %q has version %q, want %q", ErrInvalidChart, name, md.Version, version)
	}
	return md, nil
}

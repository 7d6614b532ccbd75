package helmrepo

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Default limits, Flux's defaults of --helm-index-max-size and
// --helm-chart-max-size: an index lists no chart sizes, so each download
// is capped.
const (
	DefaultMaxIndexSize = 50 << 20
	DefaultMaxChartSize = 10 << 20
)

// Options says how to reach one chart repository. The zero value is
// anonymous HTTPS with the system roots, a 60s timeout and Flux's size
// limits.
type Options struct {
	// Username and Password are sent as basic auth to the repository's
	// host. Default: anonymous.
	Username, Password string
	// PassCredentials also sends them to chart URLs on other hosts.
	// Default: never.
	PassCredentials bool
	// TLSConfig customises HTTPS (CA bundle, client certificate).
	// Default: the system roots.
	TLSConfig *tls.Config
	// Timeout bounds one index fetch or chart download. Default: 60s.
	Timeout time.Duration
	// MaxIndexSize refuses a larger index.yaml: from its Content-Length
	// before the download, else once more is read. Default:
	// DefaultMaxIndexSize.
	MaxIndexSize int64
	// MaxChartSize refuses a larger chart archive, likewise. Default:
	// DefaultMaxChartSize.
	MaxChartSize int64
	// Dial opens every TCP connection the fetcher makes (HTTP, HTTPS), to
	// the repository, to the hosts of its chart URLs and redirects, and to
	// a proxy; the engine passes its destination policy's dialer. A hook
	// gets a transport of its own, closed when the download ends, where
	// repositories without one share connections. Default: a net.Dialer
	// with a 30s timeout, as net/http's default transport.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 60 * time.Second
	}
	return o.Timeout
}

func (o Options) maxIndexSize() int64 {
	if o.MaxIndexSize <= 0 {
		return DefaultMaxIndexSize
	}
	return o.MaxIndexSize
}

func (o Options) maxChartSize() int64 {
	if o.MaxChartSize <= 0 {
		return DefaultMaxChartSize
	}
	return o.MaxChartSize
}

// ClientOptions bounds what a Client keeps in memory. The zero value
// keeps four parsed indexes of up to 64 MiB of index.yaml in all, and
// 64 MiB of chart archives.
type ClientOptions struct {
	// IndexCacheEntries is how many parsed indexes are kept. Default: 4;
	// negative: none.
	IndexCacheEntries int
	// IndexCacheBytes bounds the summed size of the index.yaml files
	// whose parsed form is kept. Default: 64 MiB.
	IndexCacheBytes int64
	// ChartCacheBytes bounds the summed size of the chart archives kept.
	// Default: 64 MiB; negative: none.
	ChartCacheBytes int64
}

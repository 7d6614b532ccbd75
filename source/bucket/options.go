package bucket

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

// Server says how to reach an S3-compatible endpoint and sign in to it. The
// zero value is not usable: Endpoint is required.
type Server struct {
	// Endpoint is the host and optional port of the S3 API, without a
	// scheme, e.g. "s3.amazonaws.com" or "minio.example.com:9000".
	Endpoint string
	// Insecure talks to the endpoint over plain HTTP (Flux's
	// spec.insecure). Default: HTTPS.
	Insecure bool
	// Region is the bucket's region. Default: asked from the endpoint.
	Region string
	// AccessKey and SecretKey sign requests (AWS signature v4) when both
	// are set. Default: anonymous requests.
	AccessKey, SecretKey string
	// TLSConfig customises HTTPS (CA bundle, client certificate).
	// Default: the system roots.
	TLSConfig *tls.Config
	// ProxyURL is an HTTP(S) proxy. Default: the HTTPS_PROXY/HTTP_PROXY
	// environment.
	ProxyURL string
	// MaxRetries bounds the retries of one request. Default: minio-go's
	// (10). minio-go retries a connection the Dial hook refused, too.
	MaxRetries int
	// Dial opens every TCP connection the fetcher makes (HTTP, HTTPS), to
	// the endpoint and to a proxy; the engine passes its destination
	// policy's dialer. Each List, Fetch and FetchRevision has a transport
	// of its own. Default: a net.Dialer with a 30s timeout, as minio-go's
	// default transport.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Options configures List, Fetch and FetchRevision. Only Server.Endpoint
// is required.
type Options struct {
	// Server is how to reach the endpoint.
	Server
	// Prefix restricts the objects to the keys that start with it.
	// Default: the whole bucket.
	Prefix string
	// Ignore holds .gitignore-syntax patterns applied to the object keys
	// after those of the bucket's root .sourceignore (Flux's spec.ignore).
	// Default: none.
	Ignore []string
	// Timeout bounds the listing and, separately, the downloads. Default:
	// 60s.
	Timeout time.Duration
	// LastRevision is the revision of the artifact the caller holds. Fetch
	// downloads nothing when the bucket still lists to it. Pass it only
	// while that artifact exists in the store and the ignore patterns are
	// unchanged. Default: none.
	LastRevision string
	// Reuse is an artifact in the store (the previous one) whose files are
	// copied instead of downloaded when the object's ETag is their MD5.
	// Default: none, every object is downloaded.
	Reuse source.Artifact
	// MaxSize limits the total size of the objects, and so the size of
	// each: from the sizes the listing gives, before anything is
	// downloaded, and then from the size each object has when it is
	// downloaded, since it may have grown. Default: source.DefaultMaxSize;
	// negative: no limit.
	MaxSize int64
	// Concurrency bounds the downloads in flight. Default: 20.
	Concurrency int
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 60 * time.Second
	}
	return o.Timeout
}

func (o Options) maxSize() int64 {
	if o.MaxSize == 0 {
		return source.DefaultMaxSize
	}
	return o.MaxSize
}

func (o Options) concurrency() int {
	if o.Concurrency <= 0 {
		return 20
	}
	return o.Concurrency
}

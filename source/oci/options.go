package oci

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

// Ref selects the manifest. Digest wins over SemVer, which wins over Tag,
// as in Flux's OCIRepository. The zero Ref is the tag "latest".
type Ref struct {
	// Tag is a tag, e.g. "v1.0.0".
	Tag string
	// SemVer is a range over the tags; the highest matching tag wins.
	// Tags with "_" in place of "+" (as Helm pushes them) are understood.
	SemVer string
	// SemVerFilter, with SemVer, is a regular expression that a tag must
	// match to be considered, as Flux's ref.semverFilter. Default: every
	// tag.
	SemVerFilter string
	// Digest pins the manifest, "sha256:<hex>".
	Digest string
}

// Operation says what to do with the selected layer.
type Operation string

const (
	// Extract unpacks the layer (a tar.gz) and archives the tree again,
	// applying ignore patterns. It is the default.
	Extract Operation = "extract"
	// Copy stores the layer blob as it is.
	Copy Operation = "copy"
)

// LayerSelector picks one layer of the manifest.
type LayerSelector struct {
	// MediaType selects the first layer of this media type. Default: the
	// first layer, whatever its type.
	MediaType string
	// Operation is Extract or Copy. Default: Extract.
	Operation Operation
}

// Registry says how to reach a registry and sign in to it. The zero value
// is anonymous HTTPS with the system roots and the environment's proxy.
type Registry struct {
	// DockerConfigJSON is a docker config.json ({"auths": {...}}), as in a
	// kubernetes.io/dockerconfigjson Secret. Default: anonymous.
	DockerConfigJSON []byte
	// Username and Password are basic credentials for the repository's
	// registry, where they win over DockerConfigJSON. Default: none.
	Username, Password string
	// PlainHTTP talks to the registry over HTTP, for local registries
	// (Flux's spec.insecure). Default: HTTPS only.
	PlainHTTP bool
	// TLSConfig customises HTTPS (CA bundle, client certificates,
	// InsecureSkipVerify). Default: the system roots.
	TLSConfig *tls.Config
	// ProxyURL is an HTTP(S) proxy. Default: the HTTPS_PROXY/HTTP_PROXY
	// environment.
	ProxyURL string
	// Dial opens every TCP connection the fetcher makes (HTTP, HTTPS), to
	// the registry, to its token service and blob redirects, and to a
	// proxy; the engine passes its destination policy's dialer. A hook
	// gets a transport of its own (the verbs here close it when they
	// end), where registries without one share connections. Default: a
	// net.Dialer with a 30s timeout, as net/http's default transport.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Options configures Resolve, Pull, Fetch, FetchRevision and ReadRevision.
// The zero value pulls the tag "latest" anonymously over HTTPS and
// extracts its first layer.
type Options struct {
	// Registry is how to reach the registry. Default: anonymous HTTPS.
	Registry
	// Ref selects the manifest. Default: tag "latest".
	Ref Ref
	// Layer selects the layer and the operation. Default: first layer,
	// extracted.
	Layer LayerSelector
	// Timeout bounds the whole operation. Default: 60s.
	Timeout time.Duration
	// LastRevision is the revision of the artifact the caller holds. Fetch
	// skips the pull when the registry still resolves to it. Pass it only
	// while that artifact exists in the store and the layer selector and
	// ignore patterns are unchanged. Default: none.
	LastRevision string
	// Verify, when set, is called by Fetch with the resolved manifest's
	// digest reference ("host/repo@sha256:<hex>") before anything is
	// pulled or stored, as Flux's spec.verify; an error ends the fetch and
	// is returned wrapped. It is not called when the registry still resolves
	// to LastRevision. Default: none.
	Verify func(ctx context.Context, ref string) error
	// Ignore holds extra .gitignore-syntax patterns applied when the
	// layer is extracted. Default: none.
	Ignore []string
	// MaxSize limits the size of the selected layer, as its descriptor in
	// the manifest gives it: a larger layer is refused before it is pulled,
	// and no more than the descriptor's size is read. It also limits what
	// an extracted layer may unpack to. Default: source.DefaultMaxSize;
	// negative: no limit.
	MaxSize int64
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

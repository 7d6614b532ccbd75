package git

import (
	"context"
	"net"
	"path"
	"strings"
	"time"

	fluxgit "github.com/fluxcd/pkg/git"
)

// Ref selects what to check out. The first non-empty field of Commit, Name,
// SemVer, Tag, Branch wins, as in Flux's GitRepository; Branch may go with
// Commit to say which branch to fetch the commit from. The zero Ref follows
// the remote's HEAD.
type Ref struct {
	// Branch is a branch name, e.g. "main".
	Branch string
	// Tag is a tag name, e.g. "v1.0.0".
	Tag string
	// SemVer is a range over the tags, e.g. ">=1.0.0 <2.0.0"; the highest
	// matching tag wins.
	SemVer string
	// Name is a full reference name, e.g. "refs/heads/main" or
	// "refs/pull/1/head".
	Name string
	// Commit is a full 40-hex SHA-1.
	Commit string
}

// Auth holds credentials. Empty fields are unused; the zero value is
// anonymous access.
type Auth struct {
	// Username and Password are HTTPS basic auth.
	Username, Password string
	// BearerToken is sent as "Authorization: Bearer <token>" over HTTPS.
	BearerToken string
	// SSHPrivateKey is a PEM private key for ssh:// URLs, with its
	// optional SSHPassphrase. KnownHosts (known_hosts format) is then
	// required: host keys are always verified.
	SSHPrivateKey []byte
	SSHPassphrase string
	KnownHosts    []byte
	// SSHUser is the SSH user when the URL has none. Default: "git".
	SSHUser string
}

// Options configures Resolve, Checkout and Fetch. The zero value makes a
// shallow, anonymous clone of the remote's HEAD with a 60 s timeout.
type Options struct {
	// Ref selects the reference. Default: the remote's HEAD.
	Ref Ref
	// Auth holds the credentials. Default: anonymous.
	Auth Auth
	// ProxyURL is an HTTP(S) proxy, with optional user info; over SSH, a
	// socks5:// proxy. Default: the HTTPS_PROXY/HTTP_PROXY environment
	// (over SSH, ALL_PROXY).
	ProxyURL string
	// Dial opens every TCP connection the fetcher makes (HTTP, HTTPS,
	// SSH), to the server and to a proxy; the engine passes its
	// destination policy's dialer. URLs of other schemes (git://,
	// file://) are refused, since go-git would open them without it.
	// Default: a net.Dialer with a 30s timeout, as net/http's default
	// transport.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CABundle adds PEM certificates to the system pool for HTTPS.
	CABundle []byte
	// Timeout bounds each network operation. Default: 60s.
	Timeout time.Duration
	// There is no size limit: ls-remote gives no size to check before the
	// clone, and what a clone costs (the objects in memory, inflated and
	// with their deltas resolved, then the work tree) is not what crosses
	// the network, so a cap on the bytes received would not bound it.
	// Flux's GitRepository has no size limit either.

	// Depth is the clone depth. Default: 1 (shallow). A negative value
	// fetches the full history. A Commit ref always fetches full history.
	Depth int
	// LastRevision is the revision of the artifact the caller holds. Fetch
	// skips the clone when the remote still resolves to it. Pass it only
	// while that artifact exists in the store and the ignore patterns are
	// unchanged. Default: none.
	LastRevision string
	// Ignore holds extra .gitignore-syntax patterns for the archive, on top
	// of .sourceignore files and the VCS defaults. Default: none.
	Ignore []string
	// SparseCheckout lists the directories to check out, as Flux's
	// spec.sparseCheckout: the artifact holds only them. Default: the
	// whole tree.
	SparseCheckout []string
	// Verify, when set, is called with the fetched commit before its tree
	// is checked out or anything is stored, as Flux's spec.verify: the
	// commit carries its signature and its encoding without it, and, when
	// the reference is a tag, ReferencingTag (with no hash for a
	// lightweight tag). An error ends the fetch and is returned wrapped.
	// Default: none.
	Verify func(*fluxgit.Commit) error
	// Include copies other trees into the work tree before it is archived,
	// in order (Flux's spec.include). The revision stays the commit's; the
	// artifact's digest covers the included files. Default: none.
	Include []Include
}

// sparse returns the sparse-checkout directories as clean relative paths.
func (o Options) sparse() []string {
	if len(o.SparseCheckout) == 0 {
		return nil
	}
	out := make([]string, 0, len(o.SparseCheckout))
	for _, d := range o.SparseCheckout {
		out = append(out, strings.TrimPrefix(path.Clean("/"+d), "/"))
	}
	return out
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 60 * time.Second
	}
	return o.Timeout
}

func (o Options) depth() int {
	switch {
	case o.Ref.Commit != "" || o.Depth < 0:
		return 0 // go-git: no limit
	case o.Depth == 0:
		return 1
	}
	return o.Depth
}

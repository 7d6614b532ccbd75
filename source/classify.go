package source

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/cozystack/cozy-aio/internal/redact"
)

// Kind returns the error of this package that err, the failure of a fetch
// under ctx, is an instance of, or nil. protocol, which may be nil, knows
// the fetcher's client library (transport errors, registry or S3 error
// codes) and is asked first; what it does not name is ErrUnreachable when
// the network failed the way it fails every fetcher: a dial or connection
// error, a DNS failure, a certificate the TLS handshake rejected, or a
// deadline. The fetchers differ on other failures of the network (a
// tls.RecordHeaderError, a bare x509 error, a Timeout() error of a
// library's own type): Kind counts only what all of them counted, so that
// sharing it reclassified nothing, and each fetcher's protocol names the
// rest it counts. A fetch whose context was cancelled has no kind: the
// caller gave up, the source did not fail. A deadline is still
// ErrUnreachable: the host did not answer in time.
func Kind(ctx context.Context, err error, protocol func(error) error) error {
	if err == nil || ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	if protocol != nil {
		if kind := protocol(err); kind != nil {
			return kind
		}
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.As(err, &certErr) ||
		errors.Is(err, context.DeadlineExceeded) {
		return ErrUnreachable
	}
	return nil
}

// Classify wraps err, the failure of a fetch under ctx, with what the fetch
// was ("git https://host/repo.git", "GET https://host/index.yaml") and the
// error a caller branches on, from Kind: "what: kind: err", or "what: err"
// when err has no kind. Classify(ctx, what, nil, protocol) is nil. It does
// not redact: a fetcher whose errors may carry credentials redacts the
// result.
func Classify(ctx context.Context, what string, err error, protocol func(error) error) error {
	if err == nil {
		return nil
	}
	if kind := Kind(ctx, err, protocol); kind != nil {
		return fmt.Errorf("%s: %w: %w", what, kind, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// A Fetcher is how one fetcher's failures are classified: Classify with
// its Protocol, what it fetches named by Prefix and the address. Each
// fetcher (Git, OCI, buckets, Helm repositories) declares one; the rule is
// this one.
type Fetcher struct {
	// Prefix names the fetch before its address: "git ", "oci ", "GET ".
	Prefix string
	// Protocol knows the fetcher's client library (see Kind).
	Protocol func(error) error
	// Redact removes credentials from the error: for a fetcher whose
	// errors may carry them (a URL's userinfo, a header).
	Redact bool
	// KindOnce: an error that already carries its kind (a digest mismatch
	// the fetcher found itself) names it once, not twice.
	KindOnce bool
}

// Classify wraps err, the failure of fetching addr under ctx, as Classify
// does with the fetcher's prefix and protocol; nil for a nil err.
func (f Fetcher) Classify(ctx context.Context, addr string, err error) error {
	what := f.Prefix + addr
	if f.KindOnce {
		if kind := Kind(ctx, err, f.Protocol); kind != nil && errors.Is(err, kind) {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	err = Classify(ctx, what, err, f.Protocol)
	if f.Redact {
		return redact.Error(err)
	}
	return err
}

// IsTimeout reports whether err, or an error it wraps, says it is a
// timeout, as net.Error does. Client libraries report some timeouts in
// types of their own that are neither a *net.OpError nor
// context.DeadlineExceeded.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

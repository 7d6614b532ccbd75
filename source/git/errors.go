package git

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/cozystack/cozy-aio/internal/redact"
	"github.com/cozystack/cozy-aio/source"
)

// classify wraps err with the source error a caller branches on, and the
// repository URL, redacted with the message.
func classify(ctx context.Context, repoURL string, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		strings.Contains(err.Error(), "unable to authenticate"), strings.Contains(err.Error(), "knownhosts: key mismatch"):
		kind = source.ErrAuth
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, plumbing.ErrReferenceNotFound),
		errors.Is(err, plumbing.ErrObjectNotFound), isNoMatchingRefSpec(err), errors.Is(err, transport.ErrEmptyRemoteRepository):
		kind = source.ErrRefNotFound
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &certErr), errors.As(err, &hostErr),
		errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		kind = source.ErrUnreachable
	default:
		return redact.Error(fmt.Errorf("git %s: %w", repoURL, err))
	}
	return redact.Error(fmt.Errorf("git %s: %w: %w", repoURL, kind, err))
}

func isNoMatchingRefSpec(err error) bool {
	var e gogit.NoMatchingRefSpecError
	return errors.As(err, &e)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

package git

import (
	"crypto/x509"
	"errors"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/cozystack/cozy-aio/source"
)

// fetcher classifies Git's failures: the repository URL, redacted with
// the message.
var fetcher = source.Fetcher{Prefix: "git ", Protocol: gitKind, Redact: true}

// gitKind names what go-git and its SSH client report: their transport
// errors, and the messages of golang.org/x/crypto/ssh, which has no error
// types for a rejected key or a known_hosts mismatch. A bare
// x509.HostnameError and a Timeout() error are unreachable for Git too;
// see source.Kind.
func gitKind(err error) error {
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		strings.Contains(err.Error(), "unable to authenticate"), strings.Contains(err.Error(), "knownhosts: key mismatch"):
		return source.ErrAuth
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, plumbing.ErrReferenceNotFound),
		errors.Is(err, plumbing.ErrObjectNotFound), isNoMatchingRefSpec(err), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return source.ErrRefNotFound
	case errors.As(err, &hostErr), source.IsTimeout(err):
		return source.ErrUnreachable
	}
	return nil
}

func isNoMatchingRefSpec(err error) bool {
	var e gogit.NoMatchingRefSpecError
	return errors.As(err, &e)
}

package bucket

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/minio/minio-go/v7"

	"github.com/cozystack/cozy-aio/source"
)

var (
	// ErrUnsafeKey means an object key cannot be a path inside the
	// artifact. It comes inside an *UnsafeKeyError.
	ErrUnsafeKey = errors.New("object key is not a clean relative path")
	// ErrRevisionGone means the bucket no longer holds the objects of the
	// revision asked for.
	ErrRevisionGone = errors.New("the bucket no longer holds this revision")
)

// UnsafeKeyError names an object key that is not a clean relative path.
type UnsafeKeyError struct {
	Key string
}

func (e *UnsafeKeyError) Error() string { return fmt.Sprintf("object key %q: %v", e.Key, ErrUnsafeKey) }

// Unwrap returns ErrUnsafeKey.
func (e *UnsafeKeyError) Unwrap() error { return ErrUnsafeKey }

// classify wraps err with the source error a caller branches on and the
// bucket it concerns. minio-go's messages carry no credentials.
func classify(ctx context.Context, where string, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	resp := minio.ToErrorResponse(err)
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var authErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recErr tls.RecordHeaderError
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", where, err)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden,
		resp.Code == "AccessDenied", resp.Code == "InvalidAccessKeyId", resp.Code == "SignatureDoesNotMatch":
		kind = source.ErrAuth
	case resp.Code == "NoSuchBucket":
		kind = source.ErrRefNotFound
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &certErr), errors.As(err, &authErr),
		errors.As(err, &hostErr), errors.As(err, &recErr), errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		kind = source.ErrUnreachable
	default:
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %w: %w", where, kind, err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func isNotFound(err error) bool {
	return minio.ToErrorResponse(err).Code == "NoSuchKey"
}

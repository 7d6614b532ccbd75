package bucket

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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

// fetcher classifies a bucket's failures, naming the bucket they concern.
// minio-go's messages carry no credentials.
var fetcher = source.Fetcher{Protocol: s3Kind}

// s3Kind names what minio-go reports: the S3 error code or HTTP status of
// the response. A bare x509.UnknownAuthorityError or x509.HostnameError, a
// tls.RecordHeaderError and a Timeout() error are unreachable for buckets
// too; see source.Kind.
func s3Kind(err error) error {
	resp := minio.ToErrorResponse(err)
	var authErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recErr tls.RecordHeaderError
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden,
		resp.Code == "AccessDenied", resp.Code == "InvalidAccessKeyId", resp.Code == "SignatureDoesNotMatch":
		return source.ErrAuth
	case resp.Code == "NoSuchBucket":
		return source.ErrRefNotFound
	case errors.As(err, &authErr), errors.As(err, &hostErr), errors.As(err, &recErr), source.IsTimeout(err):
		return source.ErrUnreachable
	}
	return nil
}

func isNotFound(err error) bool {
	return minio.ToErrorResponse(err).Code == "NoSuchKey"
}

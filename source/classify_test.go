package source_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cozystack/cozy-aio/source"
)

// errProtocol stands for an error only a fetcher's client library knows,
// such as go-git's transport.ErrAuthenticationRequired or an S3
// AccessDenied code.
var errProtocol = errors.New("protocol says no")

// protocolKind classifies errProtocol, the way a fetcher's own function does.
func protocolKind(kind error) func(error) error {
	return func(err error) error {
		if errors.Is(err, errProtocol) {
			return kind
		}
		return nil
	}
}

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

func TestClassify(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()

	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	dnsErr := &net.DNSError{Err: "no such host", Name: "registry.invalid", IsNotFound: true}
	certErr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	other := errors.New("bad gateway")

	for _, tc := range []struct {
		name     string
		ctx      context.Context
		err      error
		protocol func(error) error
		kind     error // nil: err has no kind
		msg      string
	}{
		{"dial error", context.Background(), opErr, nil, source.ErrUnreachable,
			"git u: source host unreachable: dial tcp: connection refused"},
		{"DNS failure", context.Background(), dnsErr, nil, source.ErrUnreachable,
			"git u: source host unreachable: lookup registry.invalid: no such host"},
		{"certificate rejected", context.Background(), certErr, nil, source.ErrUnreachable,
			"git u: source host unreachable: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"deadline", context.Background(), fmt.Errorf("ls-remote: %w", context.DeadlineExceeded), nil, source.ErrUnreachable,
			"git u: source host unreachable: ls-remote: context deadline exceeded"},
		{"wrapped dial error", context.Background(), fmt.Errorf("listing objects: %w", opErr), nil, source.ErrUnreachable,
			"git u: source host unreachable: listing objects: dial tcp: connection refused"},
		{"context expired", expired, opErr, nil, source.ErrUnreachable,
			"git u: source host unreachable: dial tcp: connection refused"},
		{"no kind", context.Background(), other, nil, nil, "git u: bad gateway"},
		{"context cancelled", cancelled, opErr, nil, nil, "git u: dial tcp: connection refused"},
		{"context cancelled, protocol error", cancelled, errProtocol, protocolKind(source.ErrAuth), nil,
			"git u: protocol says no"},
		{"protocol auth", context.Background(), errProtocol, protocolKind(source.ErrAuth), source.ErrAuth,
			"git u: authentication failed: protocol says no"},
		{"protocol not found", context.Background(), errProtocol, protocolKind(source.ErrRefNotFound), source.ErrRefNotFound,
			"git u: reference not found: protocol says no"},
		{"protocol digest", context.Background(), errProtocol, protocolKind(source.ErrDigestMismatch), source.ErrDigestMismatch,
			"git u: digest mismatch: protocol says no"},
		{"protocol unreachable", context.Background(), errProtocol, protocolKind(source.ErrUnreachable), source.ErrUnreachable,
			"git u: source host unreachable: protocol says no"},
		{"protocol before network", context.Background(), errors.Join(errProtocol, opErr), protocolKind(source.ErrAuth), source.ErrAuth,
			"git u: authentication failed: protocol says no\ndial tcp: connection refused"},
		{"protocol without a kind", context.Background(), opErr, protocolKind(source.ErrAuth), source.ErrUnreachable,
			"git u: source host unreachable: dial tcp: connection refused"},
		// The fetchers differ on these; each one that counts them as
		// unreachable says so in its protocol function.
		{"TLS record header", context.Background(), tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, nil, nil,
			"git u: tls: first record does not look like a TLS handshake"},
		{"bare hostname error", context.Background(), x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}, nil, nil,
			"git u: x509: certificate is not valid for any names, but wanted to match h"},
		{"timeout of a library's own type", context.Background(), timeoutError{}, nil, nil, "git u: i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := source.Kind(tc.ctx, tc.err, tc.protocol); got != tc.kind {
				t.Errorf("Kind = %v, want %v", got, tc.kind)
			}
			err := source.Classify(tc.ctx, "git u", tc.err, tc.protocol)
			if err.Error() != tc.msg {
				t.Errorf("message\n got %q\nwant %q", err.Error(), tc.msg)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not wrap its cause", err)
			}
			for _, kind := range []error{source.ErrAuth, source.ErrRefNotFound, source.ErrDigestMismatch, source.ErrUnreachable} {
				if errors.Is(err, kind) != (kind == tc.kind) {
					t.Errorf("errors.Is(err, %v) = %v, want %v", kind, !(kind == tc.kind), kind == tc.kind)
				}
			}
		})
	}
}

func TestClassifyNil(t *testing.T) {
	called := false
	protocol := func(error) error { called = true; return source.ErrAuth }
	if err := source.Classify(context.Background(), "git u", nil, protocol); err != nil {
		t.Errorf("Classify(nil) = %v", err)
	}
	if kind := source.Kind(context.Background(), nil, protocol); kind != nil {
		t.Errorf("Kind(nil) = %v", kind)
	}
	if called {
		t.Error("protocol called for a nil error")
	}
}

func TestIsTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("i/o timeout"), false},
		{"timeout", timeoutError{}, true},
		{"wrapped timeout", fmt.Errorf("fetch: %w", timeoutError{}), true},
		{"net error, not a timeout", &net.DNSError{Err: "no such host", IsTimeout: false}, false},
		{"net error, timeout", &net.DNSError{Err: "timeout", IsTimeout: true}, true},
		{"deadline", context.DeadlineExceeded, true},
	} {
		if got := source.IsTimeout(tc.err); got != tc.want {
			t.Errorf("%s: IsTimeout = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSHA256Hex(t *testing.T) {
	if got, want := source.SHA256Hex(nil), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("SHA256Hex(nil) = %s, want %s", got, want)
	}
	if got, want := source.SHA256Hex([]byte("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("SHA256Hex(abc) = %s, want %s", got, want)
	}
}

// TestFetcherClassify: a fetcher's declaration adds its prefix, names a kind
// the error already carries once when asked to, and redacts when asked to.
func TestFetcherClassify(t *testing.T) {
	ctx := context.Background()
	proto := func(err error) error {
		if errors.Is(err, source.ErrDigestMismatch) {
			return source.ErrDigestMismatch
		}
		return nil
	}
	mismatch := fmt.Errorf("layer: %w", source.ErrDigestMismatch)
	once := source.Fetcher{Prefix: "oci ", Protocol: proto, KindOnce: true}.Classify(ctx, "reg/x", mismatch)
	if want := "oci reg/x: layer: " + source.ErrDigestMismatch.Error(); once.Error() != want {
		t.Errorf("KindOnce: %q, want %q", once, want)
	}
	twice := source.Fetcher{Prefix: "oci ", Protocol: proto}.Classify(ctx, "reg/x", mismatch)
	if want := "oci reg/x: " + source.ErrDigestMismatch.Error() + ": layer: " + source.ErrDigestMismatch.Error(); twice.Error() != want {
		t.Errorf("without KindOnce: %q, want %q", twice, want)
	}
	if !errors.Is(once, source.ErrDigestMismatch) || !errors.Is(twice, source.ErrDigestMismatch) {
		t.Error("the kind is lost")
	}
	red := source.Fetcher{Prefix: "git ", Redact: true}.Classify(ctx, "https://user:s3cret@host/r.git", errors.New("boom"))
	if strings.Contains(red.Error(), "s3cret") {
		t.Errorf("Redact kept the password: %q", red)
	}
	if err := (source.Fetcher{Prefix: "GET "}).Classify(ctx, "u", nil); err != nil {
		t.Errorf("nil error classified as %v", err)
	}
}

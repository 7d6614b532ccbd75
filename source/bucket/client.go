package bucket

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// newClient builds the minio-go client for a server, as Flux's generic
// provider does: static v4 credentials when both keys are set, anonymous
// otherwise, and automatic bucket lookup (path or virtual host). The
// client has a transport of its own, which the returned function closes.
func newClient(s Server) (*minio.Client, func(), error) {
	if s.Endpoint == "" {
		return nil, nil, errors.New("no endpoint")
	}
	if strings.Contains(s.Endpoint, "://") {
		return nil, nil, fmt.Errorf("endpoint %q must be a host[:port] without a scheme (use insecure for plain HTTP)", s.Endpoint)
	}
	tr, err := minio.DefaultTransport(!s.Insecure)
	if err != nil {
		return nil, nil, err
	}
	if s.Dial != nil {
		tr.DialContext = s.Dial
	}
	if s.TLSConfig != nil && !s.Insecure {
		tr.TLSClientConfig = s.TLSConfig.Clone()
	}
	if s.ProxyURL != "" {
		u, err := url.Parse(s.ProxyURL)
		if err != nil {
			return nil, nil, fmt.Errorf("proxy URL: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	opts := &minio.Options{Region: s.Region, Secure: !s.Insecure, Transport: tr, MaxRetries: s.MaxRetries}
	if s.AccessKey != "" && s.SecretKey != "" {
		opts.Creds = credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")
	}
	c, err := minio.New(s.Endpoint, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("endpoint %q: %w", s.Endpoint, err)
	}
	return c, tr.CloseIdleConnections, nil
}

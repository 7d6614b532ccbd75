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
// otherwise, and automatic bucket lookup (path or virtual host).
func newClient(s Server) (*minio.Client, error) {
	if s.Endpoint == "" {
		return nil, errors.New("no endpoint")
	}
	if strings.Contains(s.Endpoint, "://") {
		return nil, fmt.Errorf("endpoint %q must be a host[:port] without a scheme (use insecure for plain HTTP)", s.Endpoint)
	}
	tr, err := minio.DefaultTransport(!s.Insecure)
	if err != nil {
		return nil, err
	}
	if s.TLSConfig != nil && !s.Insecure {
		tr.TLSClientConfig = s.TLSConfig.Clone()
	}
	if s.ProxyURL != "" {
		u, err := url.Parse(s.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("proxy URL: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	opts := &minio.Options{Region: s.Region, Secure: !s.Insecure, Transport: tr, MaxRetries: s.MaxRetries}
	if s.AccessKey != "" && s.SecretKey != "" {
		opts.Creds = credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")
	}
	c, err := minio.New(s.Endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", s.Endpoint, err)
	}
	return c, nil
}

package frame

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
)

// proxyURL builds a proxy URL from a Flux proxy Secret (address, username,
// password).
func ProxyURL(s *corev1.Secret) (string, error) {
	addr := string(s.Data["address"])
	if addr == "" {
		return "", fmt.Errorf("proxy Secret %s/%s has no 'address'", s.Namespace, s.Name)
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("proxy Secret %s/%s: address: %w", s.Namespace, s.Name, err)
	}
	if user := string(s.Data["username"]); user != "" {
		u.User = url.UserPassword(user, string(s.Data["password"]))
	}
	return u.String(), nil
}

// tlsFromSecret builds a TLS config from a Flux cert Secret (ca.crt,
// tls.crt, tls.key).
func TLSFromSecret(s *corev1.Secret) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := s.Data["ca.crt"]; len(ca) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("Secret %s/%s: ca.crt holds no PEM certificate", s.Namespace, s.Name)
		}
		cfg.RootCAs = pool
	}
	if crt, key := s.Data["tls.crt"], s.Data["tls.key"]; len(crt) > 0 || len(key) > 0 {
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s: tls.crt/tls.key: %w", s.Namespace, s.Name, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseGeneric(t *testing.T) {
	ca := testCA(t)
	cases := []struct {
		name string
		data map[string]string
		want genericCluster
	}{
		{"defaults", genericData(), genericCluster{host: "https://remote.example.com:443",
			audiences: []string{"https://Remote.Example.com"}, serviceAccount: "deployer"}},
		{"no scheme, port, path dropped", genericData("address", "10.0.0.1:6443/k8s/clusters/c-1"), genericCluster{host: "https://10.0.0.1:6443",
			audiences: []string{"10.0.0.1:6443/k8s/clusters/c-1"}, serviceAccount: "deployer"}},
		{"IPv6", genericData("address", "https://[fd00::1]"), genericCluster{host: "https://[fd00::1]:443",
			audiences: []string{"https://[fd00::1]"}, serviceAccount: "deployer"}},
		{"audiences and ca.crt", genericData("audiences", " aud-a,aud-b\n aud-c ,\n", "ca.crt", ca),
			genericCluster{host: "https://remote.example.com:443", caData: []byte(ca),
				audiences: []string{"aud-a", "aud-b", "aud-c"}, serviceAccount: "deployer"}},
		{"blank audiences default", genericData("audiences", " ,\n"), genericCluster{host: "https://remote.example.com:443",
			audiences: []string{"https://Remote.Example.com"}, serviceAccount: "deployer"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseGeneric(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if got.host != tc.want.host || string(got.caData) != string(tc.want.caData) ||
				!slices.Equal(got.audiences, tc.want.audiences) || got.serviceAccount != tc.want.serviceAccount {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseGenericRefuses(t *testing.T) {
	cases := []struct {
		name string
		data map[string]string
		msg  string // the error starts with it
	}{
		{"no provider", genericData("provider", ""), `key "provider": required`},
		{"no address", genericData("address", ""), `key "address": required`},
		{"http address", genericData("address", "http://remote.example.com"), `key "address": scheme "http" is not allowed`},
		{"address without host", genericData("address", "https://"), `key "address": "https://" has no host`},
		{"address not a URL", genericData("address", "https://remote example.com"), `key "address": parse`},
		{"bad ca.crt", genericData("ca.crt", "not a certificate"), `key "ca.crt": holds no PEM certificate`},
		{"no serviceAccountName", genericData("serviceAccountName", ""), `key "serviceAccountName": required`},
		{"bad serviceAccountName", genericData("serviceAccountName", "../admin"), `key "serviceAccountName": a lowercase RFC 1123`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseGeneric(tc.data)
			if err == nil || !strings.HasPrefix(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one starting with %q", err, tc.msg)
			}
		})
	}
}

func TestParseGenericUnsupportedProvider(t *testing.T) {
	for _, p := range []string{"aws", "azure", "gcp", "Generic"} {
		_, err := parseGeneric(map[string]string{"provider": p, "address": "https://x", "serviceAccountName": "sa"})
		var upe *UnsupportedProviderError
		if !errors.As(err, &upe) || upe.Provider != p || !strings.Contains(err.Error(), `"`+p+`"`) {
			t.Errorf("provider %q: err = %v, want an *UnsupportedProviderError naming it", p, err)
		}
	}
}

// genericData is a valid generic-provider ConfigMap's data with the given
// keys set, or deleted where the value is empty.
func genericData(kv ...string) map[string]string {
	m := map[string]string{"provider": "generic", "address": "https://Remote.Example.com", "serviceAccountName": "deployer"}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

// testCA returns a self-signed CA certificate in PEM.
func testCA(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

package signtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/notaryproject/notation-core-go/signature/jws"
	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/signer"
	"oras.land/oras-go/v2/registry/remote"
)

// NotationCA is a certificate authority and a code-signing certificate it
// issued, as a Notation user signs with.
type NotationCA struct {
	// Root is the CA certificate in PEM, for a verification Secret.
	Root  []byte
	chain []*x509.Certificate
	key   *ecdsa.PrivateKey
}

// NewNotationCA makes a CA and a signing certificate for name.
func NewNotationCA(t testing.TB, name string) NotationCA {
	t.Helper()
	cert := func(tpl, parent *x509.Certificate, pub, signer any) *x509.Certificate {
		der, err := x509.CreateCertificate(rand.Reader, tpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	now := time.Now()
	caTpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA", Organization: []string{name}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	ca := cert(caTpl, caTpl, &caKey.PublicKey, caKey)
	leaf := cert(&x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name, Organization: []string{name}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}, ca, &leafKey.PublicKey, caKey)
	return NotationCA{
		Root:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		chain: []*x509.Certificate{leaf, ca}, key: leafKey,
	}
}

// Sign signs ref ("host/repo@sha256:<hex>") in repo as `notation sign`
// does: a JWS envelope attached as an OCI referrer.
func (ca NotationCA) Sign(t testing.TB, repo *remote.Repository, ref string) {
	t.Helper()
	s, err := signer.NewGenericSigner(ca.key, ca.chain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notation.Sign(context.Background(), s, registry.NewRepository(repo), notation.SignOptions{
		SignerSignOptions: notation.SignerSignOptions{SignatureMediaType: jws.MediaTypeEnvelope},
		ArtifactReference: ref,
	}); err != nil {
		t.Fatalf("signing %s: %v", ref, err)
	}
}

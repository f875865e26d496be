// Package certs makes the small PKIs aisched runs itself: the local
// cluster's CA with its serving and client certificates, and the platform
// webhook's self-managed serving certificate; and it watches the serving
// certificate files of a component that is given them (Watch).
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// NewCA returns a new self-signed CA named commonName (client-go's
// ten-year CA) and its P-256 key.
func NewCA(commonName string) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: commonName}, key)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// SignLeaf returns a certificate for a new P-256 key, signed by the CA:
// tmpl's names and extended key usages, a random serial, digital
// signature and key encipherment key usages, valid from an hour before now
// (clock skew) until now plus validity. tmpl itself is not changed.
func SignLeaf(tmpl, ca *x509.Certificate, caKey crypto.Signer, now time.Time, validity time.Duration) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	leaf := *tmpl
	leaf.SerialNumber = serial
	leaf.NotBefore = now.Add(-time.Hour).UTC()
	leaf.NotAfter = now.Add(validity).UTC()
	leaf.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, &leaf, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// EncodeCert is cert in PEM.
func EncodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: cert.Raw})
}

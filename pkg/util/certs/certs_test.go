package certs

import (
	"crypto/ecdsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"
)

func TestSignLeaf(t *testing.T) {
	ca, caKey, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	// The CA is valid from now on (client-go makes it so).
	now := time.Now().UTC().Truncate(time.Second).Add(time.Minute)
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "svc"},
		DNSNames:    []string{"svc.ns.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leaf, key, err := SignLeaf(tmpl, ca, caKey, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber != nil {
		t.Error("SignLeaf changed the template")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("the leaf does not verify against its CA: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, CurrentTime: now.Add(25 * time.Hour)}); err == nil {
		t.Error("the leaf verifies after its validity")
	}
	if !leaf.NotBefore.Equal(now.Add(-time.Hour)) || !leaf.NotAfter.Equal(now.Add(24*time.Hour)) {
		t.Errorf("valid %s..%s, want an hour before now until a day after", leaf.NotBefore, leaf.NotAfter)
	}
	if !leaf.PublicKey.(*ecdsa.PublicKey).Equal(key.Public()) {
		t.Error("the certificate is not for the returned key")
	}
	other, _, err := SignLeaf(tmpl, ca, caKey, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if other.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("two leaves share a serial number")
	}
}

package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// TestWatch: the getter returns the files' certificate, and the new one
// after the files change.
func TestWatch(t *testing.T) {
	ca, caKey, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// issue writes a new certificate for name, and returns it and a
	// function that writes its files again.
	issue := func(name string) (*x509.Certificate, func()) {
		t.Helper()
		leaf, key, err := SignLeaf(&x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
			ca, caKey, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
		if err != nil {
			t.Fatal(err)
		}
		write := func() {
			if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(certFile, EncodeCert(leaf), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write()
		return leaf, write
	}
	first, _ := issue("first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get, err := Watch(ctx, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	served := func() []byte {
		c, err := get(nil)
		if err != nil || c == nil || len(c.Certificate) == 0 {
			t.Fatalf("GetCertificate: %v, %v", c, err)
		}
		return c.Certificate[0]
	}
	if !bytes.Equal(served(), first.Raw) {
		t.Fatal("the getter does not return the files' certificate")
	}
	// Written again until seen: the watch of the files starts in the
	// background, and a change before it is seen only at certwatcher's
	// next poll, 10s later.
	second, writeAgain := issue("second")
	deadline := time.Now().Add(20 * time.Second)
	for !bytes.Equal(served(), second.Raw) {
		if time.Now().After(deadline) {
			t.Fatal("the getter still returns the first certificate 20s after the files changed")
		}
		time.Sleep(100 * time.Millisecond)
		writeAgain()
	}
}

func TestWatchMissingFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := Watch(context.Background(), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err == nil {
		t.Error("Watch of files that are not there: no error")
	}
}

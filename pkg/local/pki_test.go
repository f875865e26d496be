package local

import (
	"bytes"
	"net"
	"os"
	"testing"
)

// The serving certificate covers the advertise address: one made without
// it is made again, from the same CA, and then kept.
func TestServingCertCoversAdvertiseAddress(t *testing.T) {
	p := pki{dir: t.TempDir()}
	advertise := net.ParseIP("10.250.0.1")
	if err := p.ensure(kubernetesServiceIP, nil); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(p.CACert())
	if err != nil {
		t.Fatal(err)
	}
	if certCovers(p.ServingCert(), advertise) || !certCovers(p.ServingCert(), kubernetesServiceIP) {
		t.Fatalf("a loopback cluster's certificate: covers %s %t, covers %s %t; want false, true",
			advertise, certCovers(p.ServingCert(), advertise), kubernetesServiceIP, certCovers(p.ServingCert(), kubernetesServiceIP))
	}
	for range 2 {
		if err := p.ensure(kubernetesServiceIP, advertise); err != nil {
			t.Fatal(err)
		}
		if !certCovers(p.ServingCert(), advertise) {
			t.Fatalf("with --advertise-address %s the serving certificate does not cover it", advertise)
		}
	}
	first, err := os.ReadFile(p.ServingCert())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ensure(kubernetesServiceIP, advertise); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(p.ServingCert())
	after, _ := os.ReadFile(p.CACert())
	if !bytes.Equal(first, again) || !bytes.Equal(ca, after) {
		t.Error("a certificate that covers the address, or the CA, was made again")
	}
}

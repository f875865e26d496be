package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
)

// TestLocalClusterAuth: the etcd of aisched up opens only to the
// apiserver's client certificate (not to plain HTTP, not to a client
// without a certificate, not to a certificate of the cluster CA, which
// users and nodes hold), and the apiserver refuses anonymous requests.
func TestLocalClusterAuth(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	pki := filepath.Join(c.DataDir, "pki")
	etcdCA := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(pki, "etcd", "ca.crt"))
	if err != nil || !etcdCA.AppendCertsFromPEM(ca) {
		t.Fatalf("etcd CA: %v", err)
	}
	get := func(url string, cfg *tls.Config) (int, error) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	keyPair := func(name string) []tls.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(filepath.Join(pki, name+".crt"), filepath.Join(pki, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{pair}
	}
	etcd := c.EtcdURL()
	if code, err := get("http"+etcd[len("https"):]+"/version", nil); err == nil && code == http.StatusOK {
		t.Errorf("etcd answered plain HTTP")
	}
	if _, err := get(etcd+"/version", &tls.Config{RootCAs: etcdCA}); err == nil {
		t.Errorf("etcd answered a client without a certificate")
	}
	if _, err := get(etcd+"/version", &tls.Config{RootCAs: etcdCA, Certificates: keyPair("admin")}); err == nil {
		t.Errorf("etcd answered a certificate of the cluster CA")
	}
	if code, err := get(etcd+"/version", &tls.Config{RootCAs: etcdCA, Certificates: keyPair("apiserver-etcd-client")}); err != nil || code != http.StatusOK {
		t.Errorf("etcd with the apiserver's certificate: %d %v, want 200", code, err)
	}

	clusterCA := x509.NewCertPool()
	if ca, err = os.ReadFile(filepath.Join(pki, "ca.crt")); err != nil || !clusterCA.AppendCertsFromPEM(ca) {
		t.Fatalf("cluster CA: %v", err)
	}
	if code, err := get(c.Host+"/api/v1/secrets", &tls.Config{RootCAs: clusterCA}); err != nil || code != http.StatusUnauthorized {
		t.Errorf("anonymous request to the apiserver: %d %v, want 401", code, err)
	}
}

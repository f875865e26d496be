package local

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/aisched/aisched/pkg/util/certs"
)

// pki holds the paths of the cluster's certificates and keys. They are
// created once per data dir and reused, so a restarted cluster keeps its
// kubeconfig and service-account tokens valid.
type pki struct {
	dir string
}

const certValidity = 10 * 365 * 24 * time.Hour

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// CACert is the cluster CA; it signs the serving and client certificates.
func (p pki) CACert() string            { return p.path("ca.crt") }
func (p pki) caKey() string             { return p.path("ca.key") }
func (p pki) ServingCert() string       { return p.path("apiserver.crt") }
func (p pki) ServingKey() string        { return p.path("apiserver.key") }
func (p pki) AdminCert() string         { return p.path("admin.crt") }
func (p pki) AdminKey() string          { return p.path("admin.key") }
func (p pki) ServiceAccountKey() string { return p.path("sa.key") }
func (p pki) WebhookCert() string       { return p.path("webhook.crt") }
func (p pki) WebhookKey() string        { return p.path("webhook.key") }
func (p pki) TokenFile() string         { return p.path("tokens.csv") }

// etcd's own CA, apart from the cluster CA: a certificate the cluster CA
// signs for a user or a node must not open etcd, which only the apiserver
// reaches.
func (p pki) EtcdCACert() string     { return p.path("etcd/ca.crt") }
func (p pki) etcdCAKey() string      { return p.path("etcd/ca.key") }
func (p pki) EtcdServerCert() string { return p.path("etcd/server.crt") }
func (p pki) EtcdServerKey() string  { return p.path("etcd/server.key") }
func (p pki) EtcdClientCert() string { return p.path("apiserver-etcd-client.crt") }
func (p pki) EtcdClientKey() string  { return p.path("apiserver-etcd-client.key") }

// ensure creates whatever is missing. The serving certificate is valid for
// localhost, 127.0.0.1, the in-cluster names of the kubernetes Service and
// advertise when set; one that does not cover advertise is made again.
func (p pki) ensure(serviceIP, advertise net.IP) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	caKey, caCert, err := p.loadOrCreateCA()
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, serviceIP},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if advertise != nil {
		serving.IPAddresses = append(serving.IPAddresses, advertise)
		if !certCovers(p.ServingCert(), advertise) {
			if err := os.Remove(p.ServingCert()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := p.ensureLeaf(p.ServingCert(), p.ServingKey(), serving, caCert, caKey); err != nil {
		return fmt.Errorf("apiserver serving certificate: %w", err)
	}
	// system:masters is the group the apiserver authorizes for everything;
	// the admin kubeconfig and the in-process components use this identity.
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "aisched-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := p.ensureLeaf(p.AdminCert(), p.AdminKey(), admin, caCert, caKey); err != nil {
		return fmt.Errorf("admin client certificate: %w", err)
	}
	if _, _, err := keyutil.LoadOrGenerateKeyFile(p.ServiceAccountKey()); err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	if _, err := p.AdminToken(); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	return p.ensureEtcd()
}

// ensureEtcd makes etcd's CA, its serving certificate (for its client
// and peer listeners on 127.0.0.1) and the apiserver's client
// certificate.
func (p pki) ensureEtcd() error {
	if err := os.MkdirAll(filepath.Dir(p.EtcdCACert()), 0o700); err != nil {
		return err
	}
	caKey, caCert, err := loadOrCreateCA(p.EtcdCACert(), p.etcdCAKey(), "aisched-local-etcd-ca")
	if err != nil {
		return fmt.Errorf("etcd CA: %w", err)
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "aisched-etcd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		// The peer listener both serves and dials with it.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if err := p.ensureLeaf(p.EtcdServerCert(), p.EtcdServerKey(), server, caCert, caKey); err != nil {
		return fmt.Errorf("etcd serving certificate: %w", err)
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := p.ensureLeaf(p.EtcdClientCert(), p.EtcdClientKey(), client, caCert, caKey); err != nil {
		return fmt.Errorf("etcd client certificate: %w", err)
	}
	return nil
}

func (p pki) loadOrCreateCA() (crypto.Signer, *x509.Certificate, error) {
	return loadOrCreateCA(p.CACert(), p.caKey(), "aisched-local-ca")
}

// loadOrCreateCA loads the CA at certPath and keyPath, or makes one.
func loadOrCreateCA(certPath, keyPath, commonName string) (crypto.Signer, *x509.Certificate, error) {
	if exists(certPath) && exists(keyPath) {
		certs, err := certutil.CertsFromFile(certPath)
		if err != nil {
			return nil, nil, err
		}
		key, err := keyutil.PrivateKeyFromFile(keyPath)
		if err != nil {
			return nil, nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, nil, errors.New(keyPath + " is not a signing key")
		}
		return signer, certs[0], nil
	}
	cert, key, err := certs.NewCA(commonName)
	if err != nil {
		return nil, nil, err
	}
	if err := writeKeyPair(certPath, keyPath, cert, key); err != nil {
		return nil, nil, err
	}
	return key, cert, nil
}

func (p pki) ensureLeaf(certPath, keyPath string, tmpl, ca *x509.Certificate, caKey crypto.Signer) error {
	if exists(certPath) && exists(keyPath) {
		return nil
	}
	cert, key, err := certs.SignLeaf(tmpl, ca, caKey, time.Now(), certValidity)
	if err != nil {
		return err
	}
	return writeKeyPair(certPath, keyPath, cert, key)
}

// certCovers reports whether the certificate at path is valid for ip.
func certCovers(path string, ip net.IP) bool {
	certs, err := certutil.CertsFromFile(path)
	return err == nil && len(certs) > 0 && certs[0].VerifyHostname(ip.String()) == nil
}

func writeKeyPair(certPath, keyPath string, cert *x509.Certificate, key crypto.PrivateKey) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	if err := keyutil.WriteKey(keyPath, keyPEM); err != nil {
		return err
	}
	return certutil.WriteCert(certPath, certs.EncodeCert(cert))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// AdminToken returns the bearer token of aisched-admin (system:masters),
// the one line of the apiserver's --token-auth-file, made on first use.
// The console's sign-in takes it: `aisched up` prints it with the
// console's URL, for the person who started the cluster.
func (p pki) AdminToken() (string, error) {
	if b, err := os.ReadFile(p.TokenFile()); err == nil {
		token, _, ok := strings.Cut(string(b), ",")
		if !ok || len(token) < 32 {
			return "", fmt.Errorf("%s: not a token file of aisched up; remove it to make a new token", p.TokenFile())
		}
		return token, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	line := token + `,aisched-admin,aisched-admin,"system:masters"` + "\n"
	if err := os.WriteFile(p.TokenFile(), []byte(line), 0o600); err != nil {
		return "", err
	}
	return token, nil
}

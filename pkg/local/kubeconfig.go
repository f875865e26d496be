package local

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// contextName names the cluster, user and context in the written kubeconfig.
const contextName = "aisched"

// adminRESTConfig is the client configuration of the admin identity
// (system:masters) that in-process components share.
func adminRESTConfig(host string, p pki) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   p.CACert(),
			CertFile: p.AdminCert(),
			KeyFile:  p.AdminKey(),
		},
		// In-process components share one identity; raise the client-side
		// limits so that they are not what bounds a benchmark.
		QPS:   5000,
		Burst: 10000,
	}
}

// writeKubeconfig writes a self-contained admin kubeconfig (certificates
// inlined) to path with mode 0600.
func writeKubeconfig(path, host string, p pki) error {
	ca, err := os.ReadFile(p.CACert())
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(p.AdminCert())
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.AdminKey())
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}

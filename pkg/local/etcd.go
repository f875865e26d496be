package local

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdStartTimeout bounds how long a fresh or restarted member may take to
// become ready; a single member on a local disk needs well under a second.
const etcdStartTimeout = 60 * time.Second

// startEtcd runs a single-member etcd in dir, listening on free loopback
// ports, logging warnings and errors to out (nil discards them). The client
// URL is returned for the apiserver. Both listeners take TLS only, from
// clients with a certificate of etcd's own CA (the apiserver's): no local
// user reaches the data past the apiserver's authentication, RBAC and
// admission.
func startEtcd(dir string, p pki, out io.Writer) (*embed.Etcd, string, error) {
	if out == nil {
		out = io.Discard
	}
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(out), zap.WarnLevel)).Named("etcd")
	ports, err := freePorts(2)
	if err != nil {
		return nil, "", err
	}
	client := url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[0]))}
	peer := url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[1]))}
	tlsInfo := transport.TLSInfo{
		CertFile:       p.EtcdServerCert(),
		KeyFile:        p.EtcdServerKey(),
		TrustedCAFile:  p.EtcdCACert(),
		ClientCertAuth: true,
	}

	cfg := embed.NewConfig()
	cfg.Name = "aisched"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = tlsInfo
	cfg.PeerTLSInfo = tlsInfo
	// The apiserver compacts every 5 minutes itself; etcd's own periodic
	// compaction keeps a long-running local cluster small as well.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// No metrics listener: nothing scrapes the embedded member.
	cfg.ListenMetricsUrls = nil

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd: %w", err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return nil, "", fmt.Errorf("etcd in %s was not ready after %s", dir, etcdStartTimeout)
	}
	return e, client.String(), nil
}

// freePorts asks the kernel for n distinct free loopback ports. The ports are
// released before use, so another process may take one in between; the
// caller then fails with "address already in use" and says so.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

package certs

import (
	"context"
	"crypto/tls"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Watch reads a serving certificate and its key from files, and reads
// them again as they change (controller-runtime's certwatcher: a mounted
// Secret that cert-manager renews), until ctx ends. It returns the
// current certificate's getter, for tls.Config.GetCertificate.
func Watch(ctx context.Context, certFile, keyFile string) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	w, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Watching a serving certificate", "file", certFile)
		}
	}()
	return w.GetCertificate, nil
}

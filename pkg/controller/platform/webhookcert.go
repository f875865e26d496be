package platform

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/util/certs"
)

// Validity of the webhook's certificates, and how long before the end a
// serving certificate is renewed.
const (
	webhookCertValidity = 365 * 24 * time.Hour
	webhookRenewBefore  = 30 * 24 * time.Hour
	webhookCertCheck    = time.Hour
	webhookCertRetry    = 2 * time.Second
)

// WebhookCerts keeps the webhook's serving certificate on a real cluster,
// with no cert-manager: a CA and a certificate for the webhook Service live
// in a Secret that every replica of the controller shares, the CA goes into
// the ValidatingWebhookConfiguration's caBundle, and the certificate is
// renewed a month before it ends. Only that Secret and those
// configurations are written (the chart's RBAC names them).
type WebhookCerts struct {
	Client kubernetes.Interface
	// Namespace and Service name the webhook's Service; the Secret is in
	// Namespace too.
	Namespace, Service, Secret string
	// Configuration is the ValidatingWebhookConfiguration whose webhooks
	// get the CA.
	Configuration string
	// MutatingConfiguration, when set, is a MutatingWebhookConfiguration
	// whose webhooks get the CA too (schedulername's).
	MutatingConfiguration string

	cert atomic.Pointer[tls.Certificate]
}

// GetCertificate returns the current serving certificate (for
// tls.Config.GetCertificate).
func (w *WebhookCerts) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := w.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhook certificate not loaded yet")
}

// Run makes sure of the certificate now, then every hour, until ctx ends;
// a failed attempt (a conflict with another replica, the apiserver away)
// is retried after webhookCertRetry. ready is closed after the first
// success.
func (w *WebhookCerts) Run(ctx context.Context, ready chan<- struct{}) error {
	logger := klog.FromContext(ctx)
	var readyOnce sync.Once
	for {
		next := webhookCertCheck
		if err := w.ensure(ctx, time.Now()); err != nil {
			logger.Error(err, "Webhook certificate", "secret", klog.KRef(w.Namespace, w.Secret))
			next = webhookCertRetry
		} else {
			readyOnce.Do(func() { close(ready) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// ensure creates or renews the Secret as needed, loads its certificate
// and puts its CA into the webhook configuration.
func (w *WebhookCerts) ensure(ctx context.Context, now time.Time) error {
	secrets := w.Client.CoreV1().Secrets(w.Namespace)
	s, err := secrets.Get(ctx, w.Secret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Secret}, Type: corev1.SecretTypeTLS}
		if err := w.issue(s, now); err != nil {
			return err
		}
		if s, err = secrets.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			// Another replica was first: use its certificate.
			s, err = secrets.Get(ctx, w.Secret, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
	case err != nil:
		return err
	case w.needsRenewal(s, now):
		if err := w.issue(s, now); err != nil {
			return err
		}
		if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", w.Namespace, w.Secret, err)
	}
	w.cert.Store(&cert)
	return w.injectCA(ctx, s.Data["ca.crt"])
}

// dnsNames are the names the apiserver uses for the webhook's Service.
func (w *WebhookCerts) dnsNames() []string {
	return []string{w.Service, w.Service + "." + w.Namespace, w.Service + "." + w.Namespace + ".svc", w.Service + "." + w.Namespace + ".svc.cluster.local"}
}

// needsRenewal is true when the Secret's certificate is missing, does not
// parse, ends within webhookRenewBefore, or names other hosts.
func (w *WebhookCerts) needsRenewal(s *corev1.Secret, now time.Time) bool {
	certs, err := certutil.ParseCertsPEM(s.Data[corev1.TLSCertKey])
	if err != nil || len(certs) == 0 {
		return true
	}
	leaf := certs[0]
	return now.Add(webhookRenewBefore).After(leaf.NotAfter) || !slices.Equal(leaf.DNSNames, w.dnsNames())
}

// issue writes a serving certificate into s, signed by the CA in s when it
// is there and valid for longer than the certificate, by a new CA
// otherwise.
func (w *WebhookCerts) issue(s *corev1.Secret, now time.Time) error {
	caKey, caCert := loadCA(s, now.Add(webhookCertValidity))
	if caCert == nil {
		var err error
		if caCert, caKey, err = certs.NewCA("aisched-webhook-ca"); err != nil {
			return err
		}
	}
	names := w.dnsNames()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[2]},
		DNSNames:    names,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	cert, key, err := certs.SignLeaf(tmpl, caCert, caKey, now, webhookCertValidity)
	if err != nil {
		return err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	caKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(caKey)
	if err != nil {
		return err
	}
	s.Data = map[string][]byte{
		corev1.TLSCertKey:       certs.EncodeCert(cert),
		corev1.TLSPrivateKeyKey: keyPEM,
		"ca.crt":                certs.EncodeCert(caCert),
		"ca.key":                caKeyPEM,
	}
	return nil
}

// loadCA returns the CA in s when it parses and is valid until until.
func loadCA(s *corev1.Secret, until time.Time) (crypto.Signer, *x509.Certificate) {
	certs, err := certutil.ParseCertsPEM(s.Data["ca.crt"])
	if err != nil || len(certs) == 0 || until.After(certs[0].NotAfter) {
		return nil, nil
	}
	key, err := keyutil.ParsePrivateKeyPEM(s.Data["ca.key"])
	if err != nil {
		return nil, nil
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil
	}
	return signer, certs[0]
}

// injectCA sets the caBundle of every webhook of the configurations.
func (w *WebhookCerts) injectCA(ctx context.Context, ca []byte) error {
	validating := w.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := validating.Get(ctx, w.Configuration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("validating webhook configuration %s: %w", w.Configuration, err)
	}
	if setCABundle(ca, cfg.Webhooks, func(h *admissionregistrationv1.ValidatingWebhook) *[]byte { return &h.ClientConfig.CABundle }) {
		if _, err := validating.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if w.MutatingConfiguration == "" {
		return nil
	}
	mutating := w.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	mcfg, err := mutating.Get(ctx, w.MutatingConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("mutating webhook configuration %s: %w", w.MutatingConfiguration, err)
	}
	if setCABundle(ca, mcfg.Webhooks, func(h *admissionregistrationv1.MutatingWebhook) *[]byte { return &h.ClientConfig.CABundle }) {
		_, err = mutating.Update(ctx, mcfg, metav1.UpdateOptions{})
	}
	return err
}

// setCABundle sets the bundle of each hook to ca and reports whether one
// changed.
func setCABundle[H any](ca []byte, hooks []H, bundle func(*H) *[]byte) bool {
	changed := false
	for i := range hooks {
		if b := bundle(&hooks[i]); !bytes.Equal(*b, ca) {
			*b = ca
			changed = true
		}
	}
	return changed
}

// ServingCertificate returns the webhook's serving certificate once it is
// there: with dir set, read from dir's tls.crt and tls.key (a mounted
// cert-manager Secret) and watched; otherwise kept by w (run until ctx
// ends) in its Secret, with the CA put into its webhook configurations.
// It returns nil, nil when ctx ends first.
func ServingCertificate(ctx context.Context, dir string, w *WebhookCerts) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if dir != "" {
		return certs.Watch(ctx, filepath.Join(dir, corev1.TLSCertKey), filepath.Join(dir, corev1.TLSPrivateKeyKey))
	}
	if w == nil {
		return nil, errors.New("no certificate directory and no WebhookCerts to keep one")
	}
	ready := make(chan struct{})
	go func() { _ = w.Run(ctx, ready) }()
	klog.FromContext(ctx).Info("Waiting for the webhook certificate", "secret", klog.KRef(w.Namespace, w.Secret))
	select {
	case <-ready:
		return w.GetCertificate, nil
	case <-ctx.Done():
		return nil, nil
	}
}

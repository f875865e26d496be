// Package keys is how the platform's controller and gateway agree on API
// keys without the gateway reading them. The controller reads each
// AIService's API-key Secret and publishes, in the service's
// status.apiKeys, every consumer with the HMAC-SHA256 of its key under a
// pepper: 32 random bytes in the Secret aisched-api-key-pepper of the
// platform's namespace, which the controller makes once. The gateway reads
// that one Secret by name and the statuses, never a Secret of the
// services; a reader of the statuses learns nothing of the keys without
// the pepper.
package keys

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

const (
	// PepperSecret is the Secret of the pepper, in the platform's
	// namespace.
	PepperSecret = "aisched-api-key-pepper"
	pepperKey    = "pepper"
	pepperBytes  = 32
)

// EnsurePepper returns the pepper of namespace, making it when there is
// none (another replica may be first: then its pepper is used).
func EnsurePepper(ctx context.Context, client kubernetes.Interface, namespace string) ([]byte, error) {
	secrets := client.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, PepperSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pepper := make([]byte, pepperBytes)
		if _, err := rand.Read(pepper); err != nil {
			return nil, err
		}
		s, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: PepperSecret},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{pepperKey: pepper},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, PepperSecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("API-key pepper %s/%s: %w", namespace, PepperSecret, err)
	}
	return pepperOf(s)
}

// WaitPepper returns the pepper of namespace once the controller has made
// it, checking every interval until ctx ends.
func WaitPepper(ctx context.Context, client kubernetes.Interface, namespace string, interval time.Duration) ([]byte, error) {
	var pepper []byte
	var last error
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		s, err := client.CoreV1().Secrets(namespace).Get(ctx, PepperSecret, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		pepper, err = pepperOf(s)
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("API-key pepper %s/%s (made by the platform controller): %w", namespace, PepperSecret, errors.Join(err, last))
	}
	return pepper, nil
}

func pepperOf(s *corev1.Secret) ([]byte, error) {
	p := s.Data[pepperKey]
	if len(p) < pepperBytes {
		return nil, fmt.Errorf("the pepper's Secret %s/%s: data.%s has %d bytes, want %d; delete the Secret and restart the controller, then the gateway", s.Namespace, s.Name, pepperKey, len(p), pepperBytes)
	}
	return p, nil
}

// Digests are the keys of an API-key Secret as status.apiKeys publishes
// them, by consumer. Surrounding white space is never part of a key (a
// Secret made --from-file ends it with a newline); empty keys are left
// out. It errs when the Secret holds more than v1alpha1.MaxAPIKeys keys.
func Digests(pepper []byte, secret *corev1.Secret) ([]v1alpha1.APIKeyDigest, error) {
	out := make([]v1alpha1.APIKeyDigest, 0, len(secret.Data))
	for consumer, key := range secret.Data {
		if k := strings.TrimSpace(string(key)); k != "" {
			out = append(out, v1alpha1.APIKeyDigest{Consumer: consumer, Digest: Digest(pepper, k)})
		}
	}
	if len(out) > v1alpha1.MaxAPIKeys {
		return nil, fmt.Errorf("the API-key Secret %s holds %d keys, at most %d", secret.Name, len(out), v1alpha1.MaxAPIKeys)
	}
	slices.SortFunc(out, func(a, b v1alpha1.APIKeyDigest) int { return strings.Compare(a.Consumer, b.Consumer) })
	return out, nil
}

// Digest is the base64 of HMAC-SHA256(pepper, key).
func Digest(pepper []byte, key string) string {
	return base64.StdEncoding.EncodeToString(sum(pepper, key))
}

func sum(pepper []byte, key string) []byte {
	m := hmac.New(sha256.New, pepper)
	m.Write([]byte(key))
	return m.Sum(nil)
}

// Set is a service's keys as the gateway checks them.
type Set struct {
	digests   [][]byte
	consumers []string
	// macs lends HMACs keyed with the pepper: every request checks a key,
	// and a new HMAC costs six allocations and two hashed blocks.
	macs sync.Pool // *mac
}

// maxPooledKey is the longest key whose room a pooled mac keeps.
const maxPooledKey = 1 << 10

// mac is an HMAC under the pepper, with room for a key and its sum.
type mac struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// NewSet reads published digests; one that does not decode is left out
// and named in the error (the others still work).
func NewSet(pepper []byte, published []v1alpha1.APIKeyDigest) (*Set, error) {
	s := &Set{}
	s.macs.New = func() any { return &mac{h: hmac.New(sha256.New, pepper)} }
	var bad []string
	for _, d := range published {
		b, err := base64.StdEncoding.DecodeString(d.Digest)
		if err != nil || len(b) != sha256.Size {
			bad = append(bad, d.Consumer)
			continue
		}
		s.digests = append(s.digests, b)
		s.consumers = append(s.consumers, d.Consumer)
	}
	if len(bad) > 0 {
		return s, fmt.Errorf("status.apiKeys: digests of %s do not decode", strings.Join(bad, ", "))
	}
	return s, nil
}

// Len is the number of keys.
func (s *Set) Len() int { return len(s.digests) }

// Consumer returns the consumer whose key key is. Every digest is
// compared, in constant time, whatever matched: how long the check takes
// says nothing about the key.
func (s *Set) Consumer(key string) (string, bool) {
	m := s.macs.Get().(*mac)
	defer s.macs.Put(m)
	m.h.Reset()
	m.buf = append(m.buf[:0], key...)
	m.h.Write(m.buf)
	d := m.h.Sum(m.sum[:0])
	// The key does not stay in the pool, nor does room for a huge one:
	// the hash keeps the message's last partial block until it is reset
	// (a reset HMAC restores its keyed state, overwriting that block).
	m.h.Reset()
	clear(m.buf)
	if cap(m.buf) > maxPooledKey {
		m.buf = nil
	}
	consumer, ok := "", false
	for i := range s.digests {
		if subtle.ConstantTimeCompare(s.digests[i], d) == 1 {
			consumer, ok = s.consumers[i], true
		}
	}
	return consumer, ok
}

package keys

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

func TestDigestsAndSet(t *testing.T) {
	pepper := bytes.Repeat([]byte{7}, pepperBytes)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Data: map[string][]byte{
		"bob": []byte("b-key\n"), "alice": []byte("a-key"), "empty": []byte("  "),
	}}
	digests, err := Digests(pepper, secret)
	if err != nil {
		t.Fatal(err)
	}
	if len(digests) != 2 || digests[0].Consumer != "alice" || digests[1].Consumer != "bob" {
		t.Fatalf("digests %+v, want alice and bob, sorted, without the empty key", digests)
	}
	for _, d := range digests {
		if strings.Contains(d.Digest, "key") {
			t.Errorf("digest %q holds the key", d.Digest)
		}
	}
	set, err := NewSet(pepper, digests)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a-key": "alice", "b-key": "bob"} {
		if got, ok := set.Consumer(key); !ok || got != want {
			t.Errorf("key %s: consumer %q %v, want %s", key, got, ok, want)
		}
	}
	if _, ok := set.Consumer("a-ke"); ok {
		t.Error("a prefix of a key is valid")
	}
	// Another pepper: the same keys give other digests.
	other, _ := Digests(bytes.Repeat([]byte{8}, pepperBytes), secret)
	if other[0].Digest == digests[0].Digest {
		t.Error("the digest does not depend on the pepper")
	}
	if set, _ := NewSet(bytes.Repeat([]byte{8}, pepperBytes), digests); set.Len() != 2 {
		t.Error("digests dropped")
	} else if _, ok := set.Consumer("a-key"); ok {
		t.Error("a key checks under another pepper")
	}

	bad := append(digests, v1alpha1.APIKeyDigest{Consumer: "mallory", Digest: "not base64!"})
	set, err = NewSet(pepper, bad)
	if err == nil || !strings.Contains(err.Error(), "mallory") || set.Len() != 2 {
		t.Errorf("a bad digest: %v, %d keys; want an error naming it and the others kept", err, set.Len())
	}

	many := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "many"}, Data: map[string][]byte{}}
	for i := range v1alpha1.MaxAPIKeys + 1 {
		many.Data[fmt.Sprint("c", i)] = []byte("k")
	}
	if _, err := Digests(pepper, many); err == nil {
		t.Errorf("%d keys accepted, want at most %d", len(many.Data), v1alpha1.MaxAPIKeys)
	}
}

func TestPepper(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	a, err := EnsurePepper(ctx, client, "sys")
	if err != nil || len(a) != pepperBytes {
		t.Fatalf("pepper %d bytes, %v; want %d", len(a), err, pepperBytes)
	}
	b, err := EnsurePepper(ctx, client, "sys")
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("a second replica made another pepper (%v)", err)
	}
	c, err := WaitPepper(ctx, client, "sys", time.Millisecond)
	if err != nil || !bytes.Equal(a, c) {
		t.Errorf("the gateway reads another pepper (%v)", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := WaitPepper(short, client, "elsewhere", time.Millisecond); err == nil || !strings.Contains(err.Error(), PepperSecret) {
		t.Errorf("no pepper: %v, want an error naming the Secret", err)
	}
	if _, err := client.CoreV1().Secrets("bad").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: PepperSecret},
		Data: map[string][]byte{pepperKey: []byte("short")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsurePepper(ctx, client, "bad"); err == nil || !strings.Contains(err.Error(), "delete the Secret") {
		t.Errorf("a short pepper: %v, want an error with the way out", err)
	}
}

package console

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

// TestEventsMissNoChange creates a topology as soon as the event stream
// has opened: the stream must tell of it, since a page fetches what it
// shows when the stream opens and counts on the stream for what follows.
func TestEventsMissNoChange(t *testing.T) {
	ts := newTestServer(t)
	sess := ts.signIn(t, "admin-token")
	srv := httptest.NewServer(ts)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(sess.cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(resp.Body)
		if !lines.Scan() || lines.Text() != ": watching" {
			t.Fatalf("stream %d opens with %q (status %d), want \": watching\"", i, lines.Text(), resp.StatusCode)
		}
		name := "t" + string(rune('a'+i))
		if _, err := ts.aisched.AischedV1alpha1().AischedTopologies().Create(ctx, &aischedv1alpha1.Topology{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got string
		for lines.Scan() {
			if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				got = d
				break
			}
		}
		resp.Body.Close()
		if got != `{"kinds":["aischedtopologies"]}` {
			t.Fatalf("stream %d: after topology %s was created it told %q (err %v), want the kind aischedtopologies", i, name, got, lines.Err())
		}
	}
}

package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

const (
	// maxStreams bounds the event streams open at once.
	maxStreams = 1000
	// coalesce is how long changes gather before one event tells of them.
	coalesce = 500 * time.Millisecond
	// heartbeat keeps idle streams open through proxies.
	heartbeat = 20 * time.Second
	// writeTimeout bounds each write to a stream.
	writeTimeout = 10 * time.Second
	// rewatchDelay is the pause before a watch that ended is opened again.
	rewatchDelay = time.Second
)

// watcher opens a watch of one kind from its current state.
type watcher struct {
	kind  string
	watch func(ctx context.Context, c *clients) (watch.Interface, error)
}

// listWatcher is a typed client of one kind (client-go's and aisched's
// generated clients).
type listWatcher[L interface{ GetResourceVersion() string }] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// fromNow watches the kind from its current resource version: changes
// only, not an event for every object there.
func fromNow[L interface{ GetResourceVersion() string }](ctx context.Context, i listWatcher[L]) (watch.Interface, error) {
	list, err := i.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	return i.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
}

// watchers are the kinds the pages show; each watch runs with the user's
// identity, so a stream tells only of what the user may list.
var watchers = []watcher{
	{"pods", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.kube.CoreV1().Pods(""))
	}},
	{"gpuinventories", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.aisched.AischedV1alpha1().GPUInventories())
	}},
	{"aischedtopologies", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.aisched.AischedV1alpha1().AischedTopologies())
	}},
	{"podgroups", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.aisched.SchedulingV1alpha1().PodGroups(""))
	}},
	{"operators", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.aisched.PlatformV1alpha1().Operators(""))
	}},
	{"instances", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.aisched.PlatformV1alpha1().OperatorInstances(""))
	}},
	{"services", func(ctx context.Context, c *clients) (watch.Interface, error) {
		return fromNow(ctx, c.aisched.PlatformV1alpha1().AIServices(""))
	}},
}

// events streams Server-Sent Events: "change" with the kinds that changed,
// gathered over half a second, so that the pages fetch again what they
// show. Kinds the user may not watch are left out of the stream.
func (s *Server) events(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	if !s.streams.TryAcquire(1) {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: fmt.Sprintf("too many open event streams (%d)", maxStreams)})
		return
	}
	defer s.streams.Release(1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	changed := make(chan string, 64)
	var wg, opened sync.WaitGroup
	for _, wt := range watchers {
		wg.Add(1)
		opened.Add(1)
		go func() {
			defer wg.Done()
			follow(ctx, c, wt, changed, opened.Done)
		}()
	}
	defer wg.Wait()
	defer cancel()
	// The stream opens once every kind is watched (or given up), so that a
	// page that fetches again when it opens misses no change.
	opened.Wait()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(format string, args ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": watching\n\n") {
		return
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	pending := map[string]bool{}
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case kind := <-changed:
			pending[kind] = true
			if flush == nil {
				flush = time.After(coalesce)
			}
		case <-flush:
			flush = nil
			kinds := make([]string, 0, len(pending))
			for k := range pending {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			clear(pending)
			data, _ := json.Marshal(map[string][]string{"kinds": kinds})
			if !send("event: change\ndata: %s\n\n", data) {
				return
			}
		case <-beat.C:
			if !send(": heartbeat\n\n") {
				return
			}
		}
	}
}

// follow watches one kind until ctx ends, telling changed of each change
// and opening the watch again when it ends; a watch opened again tells of
// a change, since one may have come while none was open. opened is called
// once, when the first watch is open or the kind is given up. A kind the
// user may not watch (or that is not served) is given up.
func follow(ctx context.Context, c *clients, wt watcher, changed chan<- string, opened func()) {
	first := true
	tell := func() {
		select {
		case changed <- wt.kind:
		default: // a change of this kind is already pending
		}
	}
	for ctx.Err() == nil {
		wi, err := wt.watch(ctx, c)
		if first {
			opened()
			first = false
		} else if err == nil {
			tell()
		}
		if err != nil {
			klog.V(4).InfoS("console: not watching", "kind", wt.kind, "err", err)
			return
		}
		for open := true; open; {
			select {
			case <-ctx.Done():
				open = false
			case ev, ok := <-wi.ResultChan():
				if open = ok && ev.Type != watch.Error; open {
					tell()
				}
			}
		}
		wi.Stop()
		select {
		case <-ctx.Done():
		case <-time.After(rewatchDelay):
		}
	}
	if first {
		opened()
	}
}

package modelserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// DemoImage is the demo model image: pods with a container of this
	// image (any tag) run a Server in `aisched up`.
	DemoImage = "ghcr.io/aisched/demo-model"
	// ModelNameEnv is the container variable that names the model; default DefaultModel.
	ModelNameEnv = "MODEL_NAME"
	// DefaultModel is the model's name when ModelNameEnv is not set.
	DefaultModel = "demo"
	// FailPercentAnnotation on a pod makes that percentage of its
	// inference requests fail with 500 ("0".."100").
	FailPercentAnnotation = "demo.aisched.io/fail-percent"
	// DelayAnnotation on a pod delays its inference answers (a Go
	// duration, "250ms").
	DelayAnnotation = "demo.aisched.io/delay"
)

// loopbackBase is the first address of the servers: each pod gets the next
// one of 127.77.0.0/16.
var loopbackBase = [4]byte{127, 77, 0, 0}

// Runtime runs the demo model servers of the pods of DemoImage; it
// implements the simulated kubelets' nodesim.Runtime.
type Runtime struct {
	mu   sync.Mutex
	pods map[string]*pod
	// routes maps "podIP:port" to the server's "loopback:port".
	routes map[string]string
	used   map[uint16]bool
}

type pod struct {
	uid      types.UID
	ip       string
	loopback string
	ports    []int32
	model    *Server
	servers  []*http.Server
}

// NewRuntime returns a Runtime with no servers.
func NewRuntime() *Runtime {
	return &Runtime{pods: map[string]*pod{}, routes: map[string]string{}, used: map[uint16]bool{}}
}

// demoContainer returns the pod's container of DemoImage.
func demoContainer(p *corev1.Pod) *corev1.Container {
	for i, c := range p.Spec.Containers {
		if c.Image == DemoImage || strings.HasPrefix(c.Image, DemoImage+":") || strings.HasPrefix(c.Image, DemoImage+"@") {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// behaviourOf reads the pod's demo annotations; errors name the annotation.
func behaviourOf(p *corev1.Pod) (Behaviour, error) {
	var b Behaviour
	if v, ok := p.Annotations[FailPercentAnnotation]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return b, fmt.Errorf("annotation %s: %q is not a percentage from 0 to 100", FailPercentAnnotation, v)
		}
		b.FailPercent = n
	}
	if v, ok := p.Annotations[DelayAnnotation]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Hour {
			return b, fmt.Errorf("annotation %s: %q is not a duration from 0 to 1h", DelayAnnotation, v)
		}
		b.Delay = d
	}
	return b, nil
}

// Run starts the servers of a pod of DemoImage, one per container port, on
// a loopback address of its own, or updates their behaviour.
func (r *Runtime) Run(ctx context.Context, p *corev1.Pod, podIP string) error {
	c := demoContainer(p)
	if c == nil {
		return nil
	}
	b, err := behaviourOf(p)
	if err != nil {
		return err
	}
	key := p.Namespace + "/" + p.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.pods[key]; ok {
		if old.uid == p.UID && old.ip == podIP {
			old.model.SetBehaviour(b)
			return nil
		}
		r.stopLocked(key)
	}
	if len(c.Ports) == 0 {
		return fmt.Errorf("container %s: image %s serves on its ports, and it has none", c.Name, DemoImage)
	}
	name := DefaultModel
	for _, e := range c.Env {
		if e.Name == ModelNameEnv && e.Value != "" {
			name = e.Value
		}
	}
	np := &pod{uid: p.UID, ip: podIP, model: NewServer(name, p.Name)}
	np.model.SetBehaviour(b)
	listeners, err := r.listenLocked(np, c.Ports)
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	r.pods[key] = np
	for i, l := range listeners {
		port := c.Ports[i].ContainerPort
		srv := &http.Server{Handler: np.model, ReadHeaderTimeout: 10 * time.Second}
		np.servers = append(np.servers, srv)
		np.ports = append(np.ports, port)
		addr := l.Addr().String()
		r.routes[net.JoinHostPort(podIP, strconv.Itoa(int(port)))] = addr
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Demo model server stopped", "pod", key, "address", addr)
			}
		}()
	}
	return nil
}

// listenLocked takes a loopback address of its own for the pod and listens
// there on every port. An address another process (or another cluster in
// this one) holds is skipped and stays marked used.
func (r *Runtime) listenLocked(np *pod, ports []corev1.ContainerPort) ([]net.Listener, error) {
	for {
		loopback, err := r.takeLocked()
		if err != nil {
			return nil, err
		}
		var listeners []net.Listener
		for _, port := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(loopback, strconv.Itoa(int(port.ContainerPort))))
			if err != nil {
				for _, l := range listeners {
					l.Close()
				}
				listeners = nil
				if !errors.Is(err, syscall.EADDRINUSE) {
					r.release(loopback)
					return nil, fmt.Errorf("port %d: %w", port.ContainerPort, err)
				}
				break
			}
			listeners = append(listeners, l)
		}
		if listeners != nil {
			np.loopback = loopback
			return listeners, nil
		}
	}
}

// takeLocked returns a free loopback address.
func (r *Runtime) takeLocked() (string, error) {
	for i := uint16(1); i < 65535; i++ {
		if !r.used[i] {
			r.used[i] = true
			return net.IPv4(loopbackBase[0], loopbackBase[1], byte(i>>8), byte(i)).String(), nil
		}
	}
	return "", errors.New("no free loopback address for a demo model server")
}

// Stop stops the servers of the pod with this key.
func (r *Runtime) Stop(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked(key)
}

func (r *Runtime) stopLocked(key string) {
	p, ok := r.pods[key]
	if !ok {
		return
	}
	delete(r.pods, key)
	for _, srv := range p.servers {
		_ = srv.Close()
	}
	for _, port := range p.ports {
		delete(r.routes, net.JoinHostPort(p.ip, strconv.Itoa(int(port))))
	}
	r.release(p.loopback)
}

// release frees a loopback address taken by takeLocked.
func (r *Runtime) release(loopback string) {
	ip := net.ParseIP(loopback).To4()
	delete(r.used, uint16(ip[2])<<8|uint16(ip[3]))
}

// Close stops every server.
func (r *Runtime) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key := range r.pods {
		r.stopLocked(key)
	}
}

// DialContext dials the demo server behind a pod's IP and port, the part a
// CNI plays on a real node: the gateway of `aisched up` dials through it.
// Any other address is refused, since simulated pods run nothing there.
func (r *Runtime) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	to, ok := r.routes[addr]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("nothing listens at %s: in aisched up only pods of %s serve", addr, DemoImage)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

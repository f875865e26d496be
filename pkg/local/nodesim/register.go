package nodesim

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
)

// registerNodes creates or updates every node, marks it Ready, removes the
// not-ready taint the apiserver adds on creation, creates its lease, and
// deletes simulated nodes that are no longer in the cluster file.
func (s *Simulator) registerNodes(ctx context.Context) error {
	s.nodesMu.RLock()
	nodes := make([]Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		nodes = append(nodes, n)
	}
	s.nodesMu.RUnlock()
	if err := s.register(ctx, nodes); err != nil {
		return err
	}
	return s.removeStaleNodes(ctx)
}

// AddNodes registers the nodes of more pools while the simulator runs, as
// if their kubelets had just started; they are simulated from then on and
// get pod CIDRs after those of the nodes already there. Nodes added this
// way are not in the cluster file, so a restart of `aisched up` on the same
// data directory removes them.
func (s *Simulator) AddNodes(ctx context.Context, pools *clusterfile.Cluster) error {
	s.nodesMu.Lock()
	nodes := nodesFrom(pools, len(s.nodes))
	for _, n := range nodes {
		if _, dup := s.nodes[n.Object.Name]; dup {
			s.nodesMu.Unlock()
			return fmt.Errorf("nodesim: node %s exists", n.Object.Name)
		}
	}
	for _, n := range nodes {
		s.nodes[n.Object.Name] = n
	}
	s.nodesMu.Unlock()
	return s.register(ctx, nodes)
}

// register creates or updates each node, marks it Ready, publishes its GPU
// inventory and creates its lease.
func (s *Simulator) register(ctx context.Context, nodes []Node) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(registerParallelism)
	for _, n := range nodes {
		g.Go(func() error {
			node, existed, err := s.registerNode(gctx, n.Object)
			if err != nil {
				return fmt.Errorf("register node %s: %w", n.Object.Name, err)
			}
			if err := s.alloc.addNode(node); err != nil {
				return err
			}
			if err := s.publishInventory(gctx, node, n.Inventory); err != nil {
				return fmt.Errorf("GPU inventory of node %s: %w", node.Name, err)
			}
			if len(n.Slices) > 0 || existed {
				if err := s.publishSlices(gctx, node, n.Slices, existed); err != nil {
					return fmt.Errorf("DRA slices of node %s: %w", node.Name, err)
				}
			}
			return s.renewLease(gctx, node)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return s.publishClasses(ctx)
}

// registerNode creates or updates the node; existed reports whether it
// was registered before (a restart).
func (s *Simulator) registerNode(ctx context.Context, want *corev1.Node) (_ *corev1.Node, existed bool, _ error) {
	nodes := s.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, want.Name, metav1.GetOptions{})
	existed = err == nil
	switch {
	case apierrors.IsNotFound(err):
		node, err = nodes.Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			return nil, false, err
		}
	case err != nil:
		return nil, false, err
	}
	// The spec: labels of the file win, taints are the file's; the pod CIDR
	// of an existing node is immutable and kept.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if node == nil {
			if node, err = nodes.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		updated := node.DeepCopy()
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			updated.Labels[k] = v
		}
		updated.Spec.Taints = want.Spec.Taints
		if updated.Spec.PodCIDR == "" {
			updated.Spec.PodCIDR, updated.Spec.PodCIDRs = want.Spec.PodCIDR, want.Spec.PodCIDRs
		}
		if equalMeta(node, updated) {
			return nil
		}
		updated, err = nodes.Update(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			node = nil
			return err
		}
		node = updated
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	status := want.Status.DeepCopy()
	status.Conditions = s.conditions(node)
	status.VolumesInUse, status.VolumesAttached, status.Images = node.Status.VolumesInUse, node.Status.VolumesAttached, node.Status.Images
	node = node.DeepCopy()
	node.Status = *status
	node, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return node, existed, err
}

func equalMeta(a, b *corev1.Node) bool {
	if !labels.Equals(a.Labels, b.Labels) || a.Spec.PodCIDR != b.Spec.PodCIDR || len(a.Spec.Taints) != len(b.Spec.Taints) {
		return false
	}
	for i := range a.Spec.Taints {
		if !a.Spec.Taints[i].MatchTaint(&b.Spec.Taints[i]) || a.Spec.Taints[i].Value != b.Spec.Taints[i].Value {
			return false
		}
	}
	return true
}

// conditions returns the node conditions of a healthy kubelet, keeping the
// transition times of conditions that do not change.
func (s *Simulator) conditions(node *corev1.Node) []corev1.NodeCondition {
	now := metav1.NewTime(s.clock.Now())
	want := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	}
	for i := range want {
		want[i].LastHeartbeatTime = now
		want[i].LastTransitionTime = now
		for _, old := range node.Status.Conditions {
			if old.Type == want[i].Type && old.Status == want[i].Status {
				want[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return want
}

// publishInventory creates or updates the node's GPUInventory, owned by
// the node so that it goes when the node goes; nodes without GPUs have none.
func (s *Simulator) publishInventory(ctx context.Context, node *corev1.Node, want *aischedv1alpha1.GPUInventory) error {
	api := s.aisched.AischedV1alpha1().GPUInventories()
	existing, err := api.Get(ctx, node.Name, metav1.GetOptions{})
	switch {
	case want == nil && apierrors.IsNotFound(err):
		return nil
	case want == nil && err == nil:
		return api.Delete(ctx, node.Name, metav1.DeleteOptions{})
	case apierrors.IsNotFound(err):
		inv := want.DeepCopy()
		inv.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		_, err = api.Create(ctx, inv, metav1.CreateOptions{})
		return err
	case err != nil:
		return err
	case equality.Semantic.DeepEqual(existing.Spec, want.Spec):
		return nil
	}
	existing.Spec = want.Spec
	_, err = api.Update(ctx, existing, metav1.UpdateOptions{})
	return err
}

// removeStaleNodes deletes nodes that carry SimulatedLabel but are not in
// the cluster file any more (the file changed between two runs).
func (s *Simulator) removeStaleNodes(ctx context.Context) error {
	list, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: SimulatedLabel + "=true"})
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		if s.simulates(n.Name) {
			continue
		}
		klog.FromContext(ctx).Info("Removing simulated node that left the cluster file", "node", n.Name)
		if err := s.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// renewLease renews the node's lease in kube-node-lease, creating it when
// missing. The lease is owned by the node like the kubelet's, so that it
// goes when the node goes. The last written lease is cached so that a
// renewal costs one write.
func (s *Simulator) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := s.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(s.clock.Now())
	if cached, ok := s.leases.Load(node.Name); ok {
		lease := cached.(*coordinationv1.Lease).DeepCopy()
		lease.Spec.RenewTime = &now
		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if err == nil {
			s.leases.Store(node.Name, updated)
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	lease, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      node.Name,
				Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(node.Name),
				LeaseDurationSeconds: ptr.To(int32(s.opts.LeaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &now
		lease.Spec.HolderIdentity = ptr.To(node.Name)
		lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	s.leases.Store(node.Name, lease)
	return nil
}

// heartbeat renews every lease each LeaseRenewInterval and refreshes the
// Ready condition each StatusReportInterval, within HeartbeatQPS writes/s.
// A node deleted by hand is left alone: a kubelet re-registers only when it
// restarts.
func (s *Simulator) heartbeat(ctx context.Context) {
	logger := klog.FromContext(ctx)
	limiter := rate.NewLimiter(rate.Limit(s.opts.HeartbeatQPS), s.opts.HeartbeatQPS)
	ticker := s.clock.NewTicker(s.opts.LeaseRenewInterval)
	defer ticker.Stop()
	lastStatus := s.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		names := s.nodeNames()
		reportStatus := s.clock.Since(lastStatus) >= s.opts.StatusReportInterval
		if reportStatus {
			lastStatus = s.clock.Now()
		}
		for _, name := range names {
			if err := limiter.Wait(ctx); err != nil {
				return
			}
			if err := s.beat(ctx, name, reportStatus); err != nil && ctx.Err() == nil {
				logger.V(2).Info("Heartbeat failed", "node", name, "err", err)
			}
		}
	}
}

func (s *Simulator) beat(ctx context.Context, name string, reportStatus bool) error {
	node, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.renewLease(ctx, node); err != nil {
		return err
	}
	if !reportStatus {
		return nil
	}
	node = node.DeepCopy()
	node.Status.Conditions = s.conditions(node)
	_, err = s.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

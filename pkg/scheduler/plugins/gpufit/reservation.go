package gpufit

import (
	"context"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

type reservation struct {
	cards []int
	uuids []string
	// memMiB is the MiB of each card a share of memory in percent holds;
	// 0 for other requests.
	memMiB int64
}

// Clone implements fwk.StateData; the reservation is read-only.
func (r *reservation) Clone() fwk.StateData { return r }

// Reserve picks the pod's cards on the chosen node, best fit (for a share
// of one card, the card the profile's card proposer proposes when it has
// room; else, for shares, the cards with the least left that have room),
// and records them in the GPU ledger so that no other pod gets them.
func (pl *GPUFit) Reserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	s, ok := getPreFilterState(cs)
	if !ok {
		return nil
	}
	nodeInfo, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	set := pl.state.Cards(nodeInfo.Node())
	if set == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasonNoGPUs)
	}
	cards := set.Cards
	usage := pl.state.Usage(nodeInfo, pod.UID, s.req.WholeCards())
	var picked []int
	if s.req.Shared() && s.req.Count == 1 {
		if idx, ok := pl.proposedCard(ctx, cs, pod, nodeInfo, cards, usage, s.req); ok {
			picked = []int{idx}
		}
	}
	if picked == nil {
		picked, _ = usage.Pick(cards, s.req, nil)
	}
	if len(picked) == 0 {
		return fwk.NewStatus(fwk.Unschedulable, reasonNotEnough)
	}
	r := &reservation{cards: picked}
	for _, idx := range picked {
		if c := gpu.CardByIndex(cards, idx); c != nil && c.UUID != "" {
			r.uuids = append(r.uuids, c.UUID)
		}
	}
	share := gpuledger.ShareOf(s.req, gpu.CardByIndex(cards, picked[0]))
	if s.req.GPUMemPercent > 0 {
		r.memMiB = share.MemMiB
	}
	pl.state.AssignPod(pod, nodeName, picked, share)
	cs.Write(reserveStateKey, r)
	klog.FromContext(ctx).V(4).Info("Reserved GPUs", "pod", klog.KObj(pod), "node", nodeName, "cards", picked)
	return nil
}

// proposedCard is the card the profile's card proposer proposes for a
// shared pod on the node, if it meets the request and has room.
func (pl *GPUFit) proposedCard(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo, cards []gpu.Card, usage gpuledger.Usage, r gpu.Request) (int, bool) {
	p := pl.state.Proposer(pl.handle)
	if p == nil {
		return 0, false
	}
	idx, ok := p.ProposeCard(ctx, cs, pod, r, nodeInfo)
	if !ok {
		return 0, false
	}
	c := gpu.CardByIndex(cards, idx)
	if c == nil || !usage.Room(c, r) {
		return 0, false
	}
	return idx, true
}

// Unreserve gives the pod's cards back.
func (pl *GPUFit) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeName string) {
	pl.state.Release(pod.UID, nodeName)
}

func getReservation(cs fwk.CycleState) (*reservation, bool) {
	s, err := cs.Read(reserveStateKey)
	if err != nil {
		return nil, false
	}
	r, ok := s.(*reservation)
	return r, ok
}

// Bind binds a pod that holds cards, with the assignment as annotations of
// the Binding, which the apiserver copies onto the pod in the same write;
// a device plugin reads them from the pod. Other pods are left to
// DefaultBinder (Skip). One write per pod, like DefaultBinder's: a PreBind
// patch would add two (the patch and the nominated-node update the
// scheduler makes before any PreBind).
func (pl *GPUFit) Bind(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	r, ok := getReservation(cs)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	annotations := map[string]string{gpu.AssignedAnnotation: gpu.FormatIndices(r.cards)}
	if len(r.uuids) == len(r.cards) {
		annotations[gpu.AssignedUUIDsAnnotation] = strings.Join(r.uuids, ",")
	}
	if r.memMiB > 0 {
		annotations[gpu.AssignedGPUMemAnnotation] = strconv.FormatInt(r.memMiB, 10)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: annotations},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if cacher := pl.handle.APICacher(); cacher != nil {
		onFinish, err := cacher.BindPod(binding)
		if err != nil {
			return fwk.AsStatus(err)
		}
		return fwk.AsStatus(cacher.WaitOnFinish(ctx, onFinish))
	}
	return fwk.AsStatus(pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}))
}

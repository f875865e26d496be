package gpufit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/gpu"
)

type reservation struct {
	node  string
	cards []int
	uuids []string
}

// Clone implements fwk.StateData; the reservation is read-only.
func (r *reservation) Clone() fwk.StateData { return r }

// Reserve picks the pod's cards on the chosen node, best fit, and records
// them in the shared state so that no other pod gets them.
func (pl *GPUFit) Reserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	s, ok := getPreFilterState(cs)
	if !ok {
		return nil
	}
	nodeInfo, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	cards := pl.state.Cards(nodeInfo.Node(), pl.useLabels)
	usage := pl.state.Usage(nodeInfo, pod.UID, s.req.Count)
	picked, ok := gpu.Pick(cards, func(i int) bool { return usage.Used[i] }, s.req)
	if !ok {
		return fwk.NewStatus(fwk.Unschedulable, reasonNotEnough)
	}
	r := &reservation{node: nodeName, cards: picked}
	for _, c := range cards {
		for _, p := range picked {
			if c.Index == p && c.UUID != "" {
				r.uuids = append(r.uuids, c.UUID)
			}
		}
	}
	pl.state.Assign(pod.UID, nodeName, picked)
	cs.Write(reserveStateKey, r)
	klog.FromContext(ctx).V(4).Info("Reserved GPUs", "pod", klog.KObj(pod), "node", nodeName, "cards", picked)
	return nil
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

// PreBindPreFlight implements fwk.PreBindPlugin: only pods with cards are
// patched, and the patch may run beside other plugins' PreBind.
func (pl *GPUFit) PreBindPreFlight(_ context.Context, cs fwk.CycleState, _ *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if _, ok := getReservation(cs); !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// PreBind writes the reserved cards on the pod before it is bound.
func (pl *GPUFit) PreBind(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	r, ok := getReservation(cs)
	if !ok {
		return nil
	}
	annotations := map[string]interface{}{gpu.AssignedAnnotation: gpu.FormatIndices(r.cards)}
	if len(r.uuids) == len(r.cards) {
		annotations[gpu.AssignedUUIDsAnnotation] = strings.Join(r.uuids, ",")
	}
	// The UID makes the patch fail on a new pod that reuses the name.
	patch, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"uid": pod.UID, "annotations": annotations}})
	if err != nil {
		return fwk.AsStatus(err)
	}
	if _, err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fwk.AsStatus(fmt.Errorf("record GPU assignment: %w", err))
	}
	return nil
}

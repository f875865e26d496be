package topology

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// The peers' pod forms, as their documentation writes them on a pod
// template (Kueue's "Topology Aware Scheduling", KAI-Scheduler's
// docs/topology, Koordinator's "Network Topology Aware Scheduling").
func TestOfPodPeers(t *testing.T) {
	kueueKeys := Constraint{RequiredKey: "annotation " + KueueRequired, PreferredKey: "annotation " + KueuePreferred, SliceKey: "annotation " + KueueSliceRequired}
	kaiKeys := Constraint{TopologyKey: "annotation " + KAITopology, RequiredKey: "annotation " + KAIRequired, PreferredKey: "annotation " + KAIPreferred, SliceKey: "annotation " + KAISegmentRequired}
	with := func(base, c Constraint) Constraint {
		c.TopologyKey, c.RequiredKey, c.PreferredKey, c.SliceKey = base.TopologyKey, base.RequiredKey, base.PreferredKey, base.SliceKey
		return c
	}
	koord := "annotation " + KoordinatorNetworkTopologySpec
	tests := []struct {
		name        string
		annotations map[string]string
		want        Constraint
		wantOK      bool
		wantErr     string
	}{{
		name:        "Kueue required",
		annotations: map[string]string{KueueRequired: "cloud.provider.com/topology-rack"},
		want:        with(kueueKeys, Constraint{Required: "cloud.provider.com/topology-rack"}), wantOK: true,
	}, {
		name:        "Kueue preferred",
		annotations: map[string]string{KueuePreferred: "cloud.provider.com/topology-block"},
		want:        with(kueueKeys, Constraint{Preferred: "cloud.provider.com/topology-block"}), wantOK: true,
	}, {
		name: "Kueue slices",
		annotations: map[string]string{KueueRequired: "cloud.provider.com/topology-block",
			KueueSliceRequired: "cloud.provider.com/topology-rack", KueueSliceSize: "16"},
		want: with(kueueKeys, Constraint{Required: "cloud.provider.com/topology-block", SliceLevel: "cloud.provider.com/topology-rack", SliceSize: 16}), wantOK: true,
	}, {
		name:        "Kueue one slice layer",
		annotations: map[string]string{KueueRequired: "cloud.com/block", KueueSliceConstraints: `[{"topology":"cloud.com/rack","size":16}]`},
		want: Constraint{Required: "cloud.com/block", SliceLevel: "cloud.com/rack", SliceSize: 16,
			RequiredKey: kueueKeys.RequiredKey, PreferredKey: kueueKeys.PreferredKey, SliceKey: "annotation " + KueueSliceConstraints}, wantOK: true,
	}, {
		name:        "Kueue unconstrained asks nothing",
		annotations: map[string]string{KueueUnconstrained: "true"},
	}, {
		name:        "Kueue two slice layers refused",
		annotations: map[string]string{KueueRequired: "cloud.com/block", KueueSliceConstraints: `[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]`},
		wantOK:      true, wantErr: "annotation kueue.x-k8s.io/podset-slice-required-topology-constraints: 2 slice layers: not supported",
	}, {
		name:        "Kueue pod set groups refused",
		annotations: map[string]string{KueueRequired: "cloud.com/block", KueuePodSetGroupName: "leader-workers"},
		wantOK:      true, wantErr: `annotation kueue.x-k8s.io/podset-group-name="leader-workers": not supported`,
	}, {
		name:        "Kueue slice without size",
		annotations: map[string]string{KueueSliceRequired: "cloud.com/rack"},
		wantOK:      true, wantErr: "annotation kueue.x-k8s.io/podset-slice-required-topology needs annotation kueue.x-k8s.io/podset-slice-size",
	}, {
		name: "KAI required and preferred",
		annotations: map[string]string{KAITopology: "cluster-topology", KAIRequired: "cloud.provider.com/topology-block",
			KAIPreferred: "cloud.provider.com/topology-rack"},
		want: with(kaiKeys, Constraint{Topology: "kai/cluster-topology", Required: "cloud.provider.com/topology-block", Preferred: "cloud.provider.com/topology-rack"}), wantOK: true,
	}, {
		name:        "KAI segments",
		annotations: map[string]string{KAITopology: "cluster-topology", KAISegmentSize: "4", KAISegmentRequired: "cloud.provider.com/topology-rack"},
		want:        with(kaiKeys, Constraint{Topology: "kai/cluster-topology", SliceLevel: "cloud.provider.com/topology-rack", SliceSize: 4}), wantOK: true,
	}, {
		name:        "KAI without its Topology",
		annotations: map[string]string{KAIRequired: "rack"},
		wantOK:      true, wantErr: "annotation kai.scheduler/topology-required-placement needs annotation kai.scheduler/topology",
	}, {
		name:        "KAI preferred segments refused",
		annotations: map[string]string{KAITopology: "t", KAISegmentSize: "4", KAISegmentPreferred: "rack"},
		wantOK:      true, wantErr: `annotation kai.scheduler/segment-topology-preferred-placement="rack": not supported`,
	}, {
		name:        "Koordinator gather strategies",
		annotations: map[string]string{KoordinatorNetworkTopologySpec: `{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"},{"layer":"BlockLayer","strategy":"PreferGather"},{"layer":"AcceleratorLayer","strategy":"PreferGather"}]}`},
		want:        Constraint{Required: "SpineLayer", Preferred: "BlockLayer,AcceleratorLayer", RequiredKey: koord, PreferredKey: koord}, wantOK: true,
	}, {
		name:        "Koordinator unknown strategy",
		annotations: map[string]string{KoordinatorNetworkTopologySpec: `{"gatherStrategy":[{"layer":"BlockLayer","strategy":"Spread"}]}`},
		wantOK:      true, wantErr: `gatherStrategy[0].strategy="Spread": want MustGather or PreferGather`,
	}, {
		name:        "two forms at once",
		annotations: map[string]string{KueueRequired: "r", "topology.aisched.io/required": "r"},
		wantOK:      true, wantErr: "annotation topology.aisched.io/required and annotation kueue.x-k8s.io/podset-required-topology both ask for a topology domain; keep one",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := OfPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}})
			if ok != tc.wantOK {
				t.Errorf("ok %v, want %v", ok, tc.wantOK)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// Volcano's PodGroup forms, from Volcano's network topology user guide:
// a job's networkTopology (hard, highestTierAllowed), a soft one, and a
// partition policy's (a PodGroup's subGroupPolicy).
func TestOfVolcano(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		want    Constraint
		wantErr string
	}{{
		name: "hard",
		spec: "networkTopology: {mode: hard, highestTierAllowed: 2}",
		want: Constraint{Topology: "volcano", Required: "2", PreferFinest: true, TopologyKey: "spec.networkTopology", RequiredKey: "spec.networkTopology", PreferredKey: "spec.networkTopology"},
	}, {
		name: "soft",
		spec: "networkTopology: {mode: soft}",
		want: Constraint{Topology: "volcano", PreferFinest: true, TopologyKey: "spec.networkTopology", RequiredKey: "spec.networkTopology", PreferredKey: "spec.networkTopology"},
	}, {
		name: "by tier name",
		spec: "networkTopology: {mode: hard, highestTierName: spine}",
		want: Constraint{Topology: "volcano", Required: "spine", PreferFinest: true, TopologyKey: "spec.networkTopology", RequiredKey: "spec.networkTopology", PreferredKey: "spec.networkTopology"},
	}, {
		name: "partitions",
		spec: "networkTopology: {mode: hard, highestTierAllowed: 2}\nsubGroupPolicy:\n- {name: task1, subGroupSize: 4, networkTopology: {mode: hard, highestTierAllowed: 1}}",
		want: Constraint{Topology: "volcano", Required: "2", PreferFinest: true, SliceLevel: "1", SliceSize: 4,
			TopologyKey: "spec.networkTopology", RequiredKey: "spec.networkTopology", PreferredKey: "spec.networkTopology", SliceKey: "spec.subGroupPolicy[].networkTopology"},
	}, {
		name:    "a bad mode",
		spec:    "networkTopology: {mode: strict}",
		wantErr: `spec.networkTopology.mode="strict": want hard or soft`,
	}, {
		name:    "both tier fields",
		spec:    "networkTopology: {highestTierAllowed: 1, highestTierName: leaf}",
		wantErr: "spec.networkTopology: highestTierAllowed and highestTierName: keep one",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := object(t, tc.spec).Object
			got, ok, err := OfPodGroup(nil, spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !ok {
				t.Fatalf("ok %v, error %v", ok, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The peers' topologies, translated: KAI's Topology with an alias,
// Koordinator's ClusterNetworkTopology (layers by parent), and Volcano's
// HyperNodes from its user guide's tree (s0..s3 of tier 1 over nodes, s4
// and s5 of tier 2 over them, s6 of tier 3).
func TestPeerTopologies(t *testing.T) {
	kai := kaiTopology(object(t, `
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata: {name: cluster-topology}
spec:
  levels:
  - {nodeLabel: cloud.provider.com/topology-block}
  - {nodeLabel: cloud.provider.com/topology-rack, alias: rack}
  - {nodeLabel: kubernetes.io/hostname}
`))
	if kai.Name != "kai/cluster-topology" || kai.Level("rack") != 1 || kai.Level("kubernetes.io/hostname") != 2 {
		t.Errorf("KAI topology %+v", kai)
	}
	koord := koordinatorTopology(object(t, `
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: ClusterNetworkTopology
metadata: {name: default}
spec:
  networkTopologySpec:
  - {labelKey: [network.topology.nvidia.com/block], parentTopologyLayer: SpineLayer, topologyLayer: BlockLayer}
  - {parentTopologyLayer: BlockLayer, topologyLayer: NodeTopologyLayer}
  - {labelKey: [network.topology.nvidia.com/spine], topologyLayer: SpineLayer}
`))
	want := []Level{{Key: "SpineLayer", Label: "network.topology.nvidia.com/spine", Name: "SpineLayer"},
		{Key: "BlockLayer", Label: "network.topology.nvidia.com/block", Name: "BlockLayer"},
		{Key: "NodeTopologyLayer", Label: "kubernetes.io/hostname", Name: "NodeTopologyLayer"}}
	if diff := cmp.Diff(want, koord.Levels); diff != "" {
		t.Errorf("Koordinator levels (-want,+got):\n%s", diff)
	}
	var hyper []*unstructured.Unstructured
	for _, doc := range []string{
		"metadata: {name: s0}\nspec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: node0}}}, {type: Node, selector: {exactMatch: {name: node1}}}]}",
		"metadata: {name: s1}\nspec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: '^node[23]$'}}}]}",
		"metadata: {name: s2}\nspec: {tier: 1, members: [{type: Node, selector: {labelMatch: {matchLabels: {rack: r2}}}}]}",
		"metadata: {name: s4}\nspec: {tier: 2, tierName: spine, members: [{type: HyperNode, selector: {exactMatch: {name: s0}}}, {type: HyperNode, selector: {exactMatch: {name: s1}}}]}",
		"metadata: {name: s5}\nspec: {tier: 2, tierName: spine, members: [{type: HyperNode, selector: {exactMatch: {name: s2}}}]}",
		"metadata: {name: s6}\nspec: {tier: 3, members: [{type: HyperNode, selector: {regexMatch: {pattern: '^s[45]$'}}}]}",
	} {
		hyper = append(hyper, object(t, doc))
	}
	nodes := map[string]map[string]string{"node0": nil, "node1": nil, "node2": nil, "node3": nil, "node4": {"rack": "r2"}, "node5": {"rack": "r2"}}
	v := VolcanoTopology(hyper, nodes)
	if diff := cmp.Diff([]Level{{Key: "3", Name: "tier 3"}, {Key: "2", Name: "tier 2", Alias: "spine"}, {Key: "1", Name: "tier 1"}}, v.Levels); diff != "" {
		t.Errorf("Volcano levels (-want,+got):\n%s", diff)
	}
	for node, want := range map[string][]string{"node0": {"s6", "s4", "s0"}, "node3": {"s6", "s4", "s1"}, "node5": {"s6", "s5", "s2"}} {
		var got []string
		for i := range v.Levels {
			d, _ := v.Domain(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, i)
			got = append(got, d)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s's HyperNodes (-want,+got):\n%s", node, diff)
		}
	}
	// highestTierAllowed 2 by name, the lowest tier preferred.
	r, err := Resolve(Constraint{Topology: "volcano", Required: "spine", PreferFinest: true}, []*Topology{v})
	if err != nil || r.Required != 1 || r.Preferred != 2 {
		t.Errorf("resolved %+v, %v; want tier 2 required, tier 1 preferred", r, err)
	}
}

package gpuledger

import (
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// A NodeMemo computes again exactly when the NodeInfo, the ledger's record
// of the node or the key changed, and forgets deleted nodes.
func TestNodeMemo(t *testing.T) {
	s := NewStandalone(Options{})
	m := NewNodeMemo[string, int](s)
	node := gpuNode("n", "2", nil)
	s.ObserveNode(node)
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	computed := 0
	get := func(key string) int {
		return m.Get(ni, key, func() int { computed++; return computed })
	}
	for _, step := range []struct {
		what        string
		change      func()
		key         string
		wantCompute bool
	}{
		{"first", func() {}, "a", true},
		{"nothing changed", func() {}, "a", false},
		{"another key", func() {}, "b", true},
		{"a card reserved on the node", func() { s.Assign("p", "n", []int{0}, Share{}) }, "b", true},
		{"a card reserved elsewhere", func() { s.Assign("q", "m", []int{0}, Share{}) }, "b", false},
		{"the card released", func() { s.Release("p", "") }, "b", true},
		{"the NodeInfo changed", func() { ni.AddPod(st.MakePod().Name("c").UID("c").Node("n").Obj()) }, "b", true},
		{"nothing changed again", func() {}, "b", false},
	} {
		before := computed
		step.change()
		get(step.key)
		if got := computed > before; got != step.wantCompute {
			t.Errorf("%s: computed %t, want %t", step.what, got, step.wantCompute)
		}
	}
	s.ForgetNode(node)
	if _, ok := m.byNode.Load(ni); ok {
		t.Error("the node was deleted, its entry is still there")
	}
}

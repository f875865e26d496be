package workload

import "testing"

func TestGPUWork(t *testing.T) {
	w := New()
	if w.GPUWork() {
		t.Fatal("an empty view has GPU work")
	}
	w.Observe(false)
	w.Observe(true)
	if !w.GPUWork() {
		t.Fatal("a GPU pod arrived, GPUWork is false")
	}
	// Window CPU pods push the GPU pod out.
	for range Window - 1 {
		w.Observe(false)
	}
	if !w.GPUWork() {
		t.Fatal("the GPU pod is still among the last Window pods")
	}
	w.Observe(false)
	if w.GPUWork() {
		t.Error("GPU work remembered past the window")
	}
}

// Package deliver hands a container the GPU cards the scheduler chose for
// its pod: the node agent's NRI plugin (Hook) reads the pod's
// gpu.aisched.io/assigned annotations when the runtime creates a
// container, and adjusts the container so that it sees those cards, by
// UUID, with the limits of its share for the node's isolation layer.
//
// Plan is the decision for one container (which cards, which share); Layer
// turns it into the container's environment and mounts; Holdings is the
// record of what the hook delivered, which refuses a card that is held and
// which the drift check compares with the scheduler's assignments. The
// design, and why a runtime hook rather than a device plugin chooses the
// cards, is in docs/device-path.md.
package deliver

// Package modelserver is the demo model server of `aisched up`: simulated
// pods cannot run images, so pods of DemoImage are backed by an in-process
// server that speaks the Open Inference Protocol v2 REST API (the KServe v2
// protocol), on a loopback address of its own. Runtime starts and stops
// the servers as the simulated kubelets start and stop the pods, and maps
// each pod IP to its server for the gateway's dialer, the part a CNI plays
// on a real node.
package modelserver

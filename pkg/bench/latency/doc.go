// Package latency measures the gateway's added latency: an open-loop load
// on loopback against the demo model called directly and through a
// gateway with every control on, both as child processes of the aisched
// binary, at each rate; the difference is the gateway's (aisched bench
// gateway). GatewayLatencyInChildren starts and stops the two child
// processes; UntilStdinCloses is the child's side of that.
package latency

// Package gateway is aisched's service gateway. It routes
//
//	/<namespace>/<service>/<rest>
//
// to <spec.path>/<rest> on a ready endpoint of the AIService
// <namespace>/<service> (round robin over its EndpointSlices), and enforces
// the service's security controls in this order, each refusing with its own
// status and a JSON body {"code", "reason", "message"}:
//
//  1. caller IP allow and deny lists (403);
//  2. authentication by API key (401) and the consumer allow and deny
//     lists (403);
//  3. request control: method (405), path pattern (404), body size (413),
//     required headers (400);
//  4. the kill switch (503);
//  5. flow control: the consumer's and the service's token buckets and the
//     concurrency bound (429 with Retry-After);
//  6. the circuit breaker (503 with Retry-After while open);
//  7. the proxy, bounded by the request timeout (504) and the connect
//     timeout (502).
//
// The configuration comes from the cluster: RouteReconciler compiles each
// AIService, its API-key Secret and its EndpointSlices into a route, so a
// change applies as soon as the gateway's cache sees it, with no restart,
// and the state that must survive a change (token buckets, breaker,
// requests in flight) is carried over when its own settings are unchanged.
//
// gateway.go routes a request through the controls in that order;
// controls.go holds the checks of controls 1 to 3 and 5 (the kill switch
// is one line of gateway.go, breaker.go the sixth), proxy.go
// the proxy, route.go the compiled routes, reconciler.go and run.go their
// source and the gateway's process.
package gateway

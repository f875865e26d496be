// Package platform holds the controllers of the AI service platform: an
// Operator reports whether instances may run it, an
// OperatorInstance becomes a Deployment of the Operator's containers, and
// an AIService becomes a NodePort Service and a route on aisched's gateway.
// Each object reports a Ready condition that says why not in plain words.
//
// The package also holds the admission webhook that refuses references to
// objects that do not exist (CRD validation cannot look them up), and the
// serving certificate it manages for itself on a real cluster.
//
// `aisched controller` runs it against any cluster; `aisched up` runs it
// in-process.
package platform

// Package console serves aisched's web console: the GPU map, the waiting
// work, the AI service platform and simulations, with the small JSON API
// its pages read.
//
// The console holds no rights of its own. Every call it makes to the
// apiserver carries the signed-in user's bearer token (a ServiceAccount
// token, an OIDC ID token the apiserver accepts, or the Authorization
// header an authenticating proxy passes on), so Kubernetes RBAC decides
// what each person sees and changes, and a refusal comes back as the
// apiserver wrote it. The browser keeps only an opaque session cookie
// (HttpOnly, SameSite=Strict); every change also needs the session's CSRF
// token in a header. API keys are write-only: the console writes the
// Secret of a service's keys and never reads one.
//
// The pages are plain HTML, CSS and JavaScript embedded in the binary
// (package ui): go build needs no JavaScript toolchain.
package console

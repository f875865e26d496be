// Package yamlfile is the one reader of the YAML files users write: the
// cluster file and scenarios (Decode, types named by yaml tags), the
// shared configuration (DecodeObject, types of Kubernetes' conventions
// named by json tags), the scheduler configuration (Parse for the node
// tree and Errors for the scheduler's own decoder's and validation's
// errors), and whatif's job manifests (Documents, a stream of Kubernetes
// objects). Every error names the file and, where it can be placed, the
// line and the field: "cluster.yaml:11: nodePools[0].gpus.memoryMiB:
// Invalid value: 0: must be between 1 and 1048576".
package yamlfile

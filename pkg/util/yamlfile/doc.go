// Package yamlfile decodes the YAML files users write (the cluster file,
// scenarios) strictly, and reports each error with the file, the line and
// the field it is about: "cluster.yaml:11: nodePools[0].gpus.memoryMiB:
// Invalid value: 0: must be between 1 and 1048576".
package yamlfile

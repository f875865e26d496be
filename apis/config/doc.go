// Package config holds the arguments of aisched's scheduler plugins, as
// given in a KubeSchedulerConfiguration:
//
//	pluginConfig:
//	  - name: PCCBalance
//	    args:
//	      mode: signed
//
// Each plugin decodes its arguments with Decode, which applies the defaults
// and validates them; a bad value stops the scheduler at start with an
// error naming the field (pluginConfig[PCCBalance].args.mode: ...).
//
// The types are not registered in kube-scheduler's configuration scheme:
// registration would need init() side effects on a process-wide scheme.
package config

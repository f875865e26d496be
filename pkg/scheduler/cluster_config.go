package scheduler

import (
	"bytes"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// ClusterProfiles are the profiles a scheduler beside a cluster's own
// kube-scheduler serves: aisched's, those the Helm chart ships. The
// cluster's kube-scheduler keeps default-scheduler.
var ClusterProfiles = []string{AischedProfile, BinpackProfile, GPUShareProfile}

// clusterConfigHeader replaces the local configuration's head comment.
const clusterConfigHeader = `# aisched's scheduler configuration for a real cluster, from outside it
# (aisched scheduler --print-config): aisched's profiles, as the Helm chart
# ships them, beside the cluster's own kube-scheduler, which keeps
# default-scheduler. Run it with
#   aisched scheduler --config THIS_FILE --kubeconfig ~/.kube/config
# Leader election is off: run one such scheduler, and none while the
# chart's scheduler serves the same profiles (two schedulers of a profile
# race for its pods). Why the profiles are built so: pkg/scheduler/README.md.`

// ClusterConfigYAML returns the configuration that `aisched scheduler
// --print-config` prints: the local configuration (the comments that say
// why each setting is there included) with only ClusterProfiles left,
// checked by DecodeConfig.
func ClusterConfigYAML() ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(localConfig, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	doc.HeadComment, root.HeadComment = clusterConfigHeader, ""
	if len(root.Content) > 0 {
		root.Content[0].HeadComment = ""
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "profiles" {
			continue
		}
		list := root.Content[i+1]
		list.Content = slices.DeleteFunc(list.Content, func(p *yaml.Node) bool {
			return !slices.Contains(ClusterProfiles, profileName(p))
		})
		if len(list.Content) != len(ClusterProfiles) {
			return nil, fmt.Errorf("the local configuration has %d of the profiles %v", len(list.Content), ClusterProfiles)
		}
		// The first profile kept carries the comment of default-scheduler,
		// which is gone.
		list.Content[0].HeadComment = ""
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if _, err := DecodeConfig(out.Bytes()); err != nil {
		return nil, fmt.Errorf("the cluster configuration does not decode: %w", err)
	}
	return out.Bytes(), nil
}

// profileName is the schedulerName of a profile's mapping node.
func profileName(p *yaml.Node) string {
	for i := 0; i+1 < len(p.Content); i += 2 {
		if p.Content[i].Value == "schedulerName" {
			return p.Content[i+1].Value
		}
	}
	return ""
}

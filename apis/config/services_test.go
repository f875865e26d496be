package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestDecodeServices(t *testing.T) {
	header := "apiVersion: config.aisched.io/v1alpha1\nkind: SchedulerServices\n"
	tests := []struct {
		name    string
		data    string
		want    *SchedulerServices
		wantErr []string
	}{
		{name: "defaults", data: header, want: DefaultServices()},
		{name: "set", data: header + "gpus: {useFeatureDiscoveryLabels: false}\njobQueue: {backoffSeconds: 5, maxBackoffSeconds: 600, backfill: false, partialGroupSeconds: 60}\n",
			want: func() *SchedulerServices {
				s := DefaultServices()
				s.GPUs.UseFeatureDiscoveryLabels = ptr.To(false)
				s.JobQueue = JobQueueConfig{BackoffSeconds: ptr.To[int64](5), MaxBackoffSeconds: ptr.To[int64](600), Backfill: ptr.To(false), PartialGroupSeconds: ptr.To[int64](60)}
				return s
			}()},
		{name: "no kind", data: "jobQueue: {backfill: false}\n", wantErr: []string{"services.yaml: apiVersion and kind: required"}},
		{name: "wrong kind", data: "apiVersion: config.aisched.io/v1alpha1\nkind: KubeSchedulerConfiguration\n", wantErr: []string{`services.yaml:2: kind: Unsupported value: "KubeSchedulerConfiguration"`}},
		{name: "misspelt field", data: header + "jobQueue:\n  backoffSeconds: 5\n  backof: 5\n", wantErr: []string{`services.yaml:5: unknown field "jobQueue.backof"`}},
		{name: "wrong type", data: header + "jobQueue:\n  backfill: \"no\"\n", wantErr: []string{`services.yaml:4: jobQueue.backfill: invalid value: want true or false, found string`}},
		{name: "not YAML", data: header + "jobQueue: [\n", wantErr: []string{`services.yaml:3: invalid YAML`}},
		{name: "empty", data: "", wantErr: []string{`services.yaml: file is empty: want a SchedulerServices`}},
		{name: "every bad value reported, each at its line", data: header + "jobQueue:\n  backoffSeconds: 0\n  maxBackoffSeconds: 4000\n  partialGroupSeconds: 5\n",
			wantErr: []string{"services.yaml:4: jobQueue.backoffSeconds: Invalid value: 0", "services.yaml:5: jobQueue.maxBackoffSeconds: Invalid value: 4000", "services.yaml:6: jobQueue.partialGroupSeconds: Invalid value: 5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeServices("services.yaml", []byte(tc.data))
			if len(tc.wantErr) > 0 {
				for _, want := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("error = %v, want one containing %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

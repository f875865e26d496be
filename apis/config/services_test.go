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
		{name: "no kind", data: "jobQueue: {backfill: false}\n", wantErr: []string{"apiVersion and kind: required"}},
		{name: "wrong kind", data: "apiVersion: config.aisched.io/v1alpha1\nkind: KubeSchedulerConfiguration\n", wantErr: []string{`kind: Unsupported value: "KubeSchedulerConfiguration"`}},
		{name: "misspelt field", data: header + "jobQueue: {backof: 5}\n", wantErr: []string{`unknown field "backof"`}},
		{name: "every bad value reported", data: header + "jobQueue: {backoffSeconds: 0, maxBackoffSeconds: 4000, partialGroupSeconds: 5}\n",
			wantErr: []string{"jobQueue.backoffSeconds: Invalid value: 0", "jobQueue.maxBackoffSeconds: Invalid value: 4000", "jobQueue.partialGroupSeconds: Invalid value: 5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeServices([]byte(tc.data))
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

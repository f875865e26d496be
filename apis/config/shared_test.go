package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

func TestDecodeShared(t *testing.T) {
	header := "apiVersion: config.aisched.io/v1alpha1\nkind: SharedConfiguration\n"
	tests := []struct {
		name    string
		data    string
		want    *SharedConfiguration
		wantErr []string
	}{
		{name: "defaults", data: header, want: DefaultShared()},
		{name: "set", data: header + "gpus: {useFeatureDiscoveryLabels: false}\njobQueue: {backoffSeconds: 5, maxBackoffSeconds: 600, backfill: false, partialGroupSeconds: 60}\n",
			want: func() *SharedConfiguration {
				s := DefaultShared()
				s.GPUs.UseFeatureDiscoveryLabels = ptr.To(false)
				s.JobQueue = JobQueueConfig{BackoffSeconds: ptr.To[int64](5), MaxBackoffSeconds: ptr.To[int64](600), Backfill: ptr.To(false), PartialGroupSeconds: ptr.To[int64](60)}
				return s
			}()},
		{name: "no kind", data: "jobQueue: {backfill: false}\n", wantErr: []string{"shared.yaml: apiVersion and kind: required"}},
		{name: "wrong kind", data: "apiVersion: config.aisched.io/v1alpha1\nkind: KubeSchedulerConfiguration\n", wantErr: []string{`shared.yaml:2: kind: Unsupported value: "KubeSchedulerConfiguration"`}},
		{name: "misspelt field", data: header + "jobQueue:\n  backoffSeconds: 5\n  backof: 5\n", wantErr: []string{`shared.yaml:5: unknown field "jobQueue.backof"`}},
		{name: "wrong type", data: header + "jobQueue:\n  backfill: \"no\"\n", wantErr: []string{`shared.yaml:4: jobQueue.backfill: invalid value: want true or false, found string`}},
		{name: "not YAML", data: header + "jobQueue: [\n", wantErr: []string{`shared.yaml:3: invalid YAML`}},
		{name: "empty", data: "", wantErr: []string{`shared.yaml: file is empty: want a SharedConfiguration`}},
		{name: "every bad value reported, each at its line", data: header + "jobQueue:\n  backoffSeconds: 0\n  maxBackoffSeconds: 4000\n  partialGroupSeconds: 5\n",
			wantErr: []string{"shared.yaml:4: jobQueue.backoffSeconds: Invalid value: 0", "shared.yaml:5: jobQueue.maxBackoffSeconds: Invalid value: 4000", "shared.yaml:6: jobQueue.partialGroupSeconds: Invalid value: 5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeShared(ktesting.NewLogger(t, ktesting.NewConfig()), "shared.yaml", []byte(tc.data))
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

// TestDecodeSharedDeprecatedKind reads a file of the old kind,
// SchedulerServices, as the same configuration as one of the new kind, with
// one warning that names the new kind; the new kind logs nothing.
func TestDecodeSharedDeprecatedKind(t *testing.T) {
	body := "jobQueue: {backfill: false}\n"
	for _, tc := range []struct {
		kind         string
		wantWarnings int
	}{
		{kind: SharedKind},
		{kind: DeprecatedSharedKind, wantWarnings: 1},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			got, err := DecodeShared(logger, "shared.yaml", []byte("apiVersion: config.aisched.io/v1alpha1\nkind: "+tc.kind+"\n"+body))
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultShared()
			want.JobQueue.Backfill = ptr.To(false)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			warning := "kind SchedulerServices is deprecated; name it SharedConfiguration"
			if n := strings.Count(logs, warning); n != tc.wantWarnings || tc.wantWarnings == 0 && logs != "" {
				t.Errorf("logs %q: want the warning %q %d times, and nothing else", logs, warning, tc.wantWarnings)
			}
		})
	}
}

package deliver

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// NRILogger sends NRI's logs (github.com/containerd/nri/pkg/log) to klog:
// errors and warnings as errors, the rest at verbosity 2 (NRI logs every
// plugin connection and synchronisation at info).
type NRILogger struct{}

func (NRILogger) Debugf(_ context.Context, format string, args ...any) {
	klog.V(4).InfoS(fmt.Sprintf(format, args...), "source", "nri")
}

func (NRILogger) Infof(_ context.Context, format string, args ...any) {
	klog.V(2).InfoS(fmt.Sprintf(format, args...), "source", "nri")
}

func (NRILogger) Warnf(_ context.Context, format string, args ...any) {
	klog.InfoS(fmt.Sprintf(format, args...), "source", "nri", "level", "warning")
}

func (NRILogger) Errorf(_ context.Context, format string, args ...any) {
	klog.ErrorS(nil, fmt.Sprintf(format, args...), "source", "nri")
}

package app

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/datadir"
)

// TestUpFlagError: the library's errors of local.Start reach the user
// worded with the flag that mends them; others pass as they are.
func TestUpFlagError(t *testing.T) {
	other := errors.New("something else")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"busy apiserver port", &local.ListenError{Listener: local.APIServerListener, Addr: "127.0.0.1:6443", InUse: true},
			"kube-apiserver address 127.0.0.1:6443 is already in use (another aisched or Kubernetes?); choose another with --port"},
		{"busy gateway", fmt.Errorf("platform: %w", &local.ListenError{Listener: local.GatewayListener, Addr: "127.0.0.1:8480", InUse: true}),
			"platform: gateway address 127.0.0.1:8480 is already in use; choose another with --gateway-addr"},
		{"bad console address", &local.ListenError{Listener: local.ConsoleListener, Addr: "nowhere:1", Err: other},
			"console address nowhere:1: something else; choose another with --console-addr"},
		{"data dir in use", errors.Join(&local.DataDirInUseError{Dir: "/d"}, other),
			"data dir /d is in use by another aisched\nsomething else; stop it or choose another with --data-dir"},
		{"corrupt etcd database", &datadir.CorruptDBError{Path: "/d/etcd/member/snap/db", Err: other},
			"etcd database /d/etcd/member/snap/db cannot be read: something else; restore it from a backup of --data-dir, or start over with --fresh (which discards every object)"},
		{"other", other, "something else"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := upFlagError(tc.err)
			if got.Error() != tc.want {
				t.Errorf("upFlagError = %q, want %q", got, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("upFlagError(%v) no longer wraps it", tc.err)
			}
		})
	}
}

package local

import "fmt"

// Listener names a listener of the local cluster, for ListenError.
type Listener string

// The cluster's listeners.
const (
	APIServerListener Listener = "kube-apiserver"
	GatewayListener   Listener = "gateway"
	ConsoleListener   Listener = "console"
)

// ListenError is a listener of the cluster that could not open on its
// address (Options.APIServerPort, PlatformOptions.GatewayAddr,
// ConsoleOptions.Addr): the address is in use, or not one to listen on.
type ListenError struct {
	Listener Listener
	Addr     string
	// InUse is true when another process holds the address.
	InUse bool
	Err   error
}

func (e *ListenError) Error() string {
	if e.InUse {
		return fmt.Sprintf("%s address %s is already in use", e.Listener, e.Addr)
	}
	return fmt.Sprintf("%s address %s: %v", e.Listener, e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// DataDirInUseError is a data directory that another cluster holds: two
// clusters never share one etcd data directory.
type DataDirInUseError struct {
	Dir string
}

func (e *DataDirInUseError) Error() string {
	return fmt.Sprintf("data dir %s is in use by another aisched", e.Dir)
}

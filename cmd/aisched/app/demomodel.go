package app

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aisched/aisched/pkg/local/modelserver"
	"github.com/aisched/aisched/pkg/util/httpserve"
)

func newDemoModelCommand() *cobra.Command {
	// The model's name defaults to the container's MODEL_NAME, as the
	// in-process servers of aisched up read it: an Operator's container
	// of the demo image names its model so on a real cluster too.
	addr, model := ":8080", cmp.Or(os.Getenv("MODEL_NAME"), modelserver.DefaultModel)
	var b modelserver.Behaviour
	cmd := &cobra.Command{
		Use:   "demo-model",
		Short: "Serve the demo model over the Open Inference Protocol v2 (what pods of the demo image run)",
		Long: `Serve the demo model, which answers the sum of its inputs, over the Open
Inference Protocol v2 REST API (/v2/health/ready, /v2/models/{name}/infer). In
aisched up, pods of the demo image run it in-process; this command runs it
as a process of its own, for a real cluster (the aisched image with the
argument demo-model) or as a benchmark's backend. It prints the address it
serves on.

  aisched demo-model --bind-address 127.0.0.1:8080 --model demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if b.FailPercent < 0 || b.FailPercent > 100 {
				return fmt.Errorf("--fail-percent %d: not a percentage", b.FailPercent)
			}
			if b.Delay < 0 {
				return fmt.Errorf("--delay %s: negative", b.Delay)
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--bind-address: %w", err)
			}
			s := modelserver.NewServer(model, os.Getenv("HOSTNAME"))
			s.SetBehaviour(b)
			srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "serving model %s on http://%s\n", model, l.Addr())
			return httpserve.Serve(ctx, srv, l, 5*time.Second)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&addr, "bind-address", addr, "address to serve on")
	fs.StringVar(&model, "model", model, "the model's name in the URL paths (default: $MODEL_NAME when set)")
	fs.IntVar(&b.FailPercent, "fail-percent", 0, "percentage of inference requests answered with 500")
	fs.DurationVar(&b.Delay, "delay", 0, "delay before every inference answer")
	return cmd
}

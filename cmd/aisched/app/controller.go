package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/controller/platform"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/webhook/schedulername"
)

type controllerOptions struct {
	kubeconfig    string
	namespace     string
	gatewayURL    string
	schedulerName string
	leaderElect   bool
	webhookPort   int
	webhookSvc    string
	webhookSecret string
	webhookCerts  string
	assign        bool
	metricsAddr   string
	healthAddr    string
	verbosity     int
}

func newControllerCommand() *cobra.Command {
	o := controllerOptions{
		namespace: platformNamespace(), schedulerName: scheduler.AischedProfile, leaderElect: true,
		webhookPort: 9443, webhookSvc: "aisched-controller", webhookSecret: "aisched-controller-webhook-tls",
		metricsAddr: ":8080", healthAddr: ":8081",
	}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the AI service platform's controllers (Operators, instances, services) and their webhook",
		Long: `Run the controllers of the AI service platform: an OperatorInstance becomes a
Deployment of its Operator's containers, scheduled by aisched; an AIService
becomes a NodePort Service and a route of the gateway (aisched gateway).
Every object reports a Ready condition that says why not.

It also serves the admission webhook that refuses an OperatorInstance or
AIService naming an object that does not exist, with a serving certificate
it keeps itself in the Secret --webhook-secret (no cert-manager needed), or
one it reads from --webhook-cert-dir (cert-manager's). With
--assign-scheduler it also serves the webhook that gives new pods
--scheduler-name, so teams need not edit their manifests.
It runs as a Deployment (the Helm chart charts/aisched); the replicas elect a leader.

  aisched controller --kubeconfig KUBECONFIG --gateway-url http://gateway.example:8480`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runController(o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster (default: the in-cluster configuration of the pod)")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "namespace of the leader lease, the webhook's Service and Secret, and the API-key pepper (default $POD_NAMESPACE, else aisched-system)")
	fs.StringVar(&o.gatewayURL, "gateway-url", "", "the gateway's base URL as callers reach it, for each AIService's status.url (empty: no URL)")
	fs.StringVar(&o.schedulerName, "scheduler-name", o.schedulerName, "scheduler of the instances' pods when an OperatorInstance names none")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "elect one active controller among the replicas")
	fs.IntVar(&o.webhookPort, "webhook-port", o.webhookPort, "port of the admission webhook (0: no webhook)")
	fs.StringVar(&o.webhookSvc, "webhook-service", o.webhookSvc, "the webhook's Service, which its certificate names")
	fs.StringVar(&o.webhookSecret, "webhook-secret", o.webhookSecret, "Secret that holds the webhook's CA and serving certificate")
	fs.StringVar(&o.webhookCerts, "webhook-cert-dir", "", "directory of the webhook's tls.crt and tls.key (a mounted cert-manager Secret), reloaded when they change; empty: the controller keeps its own certificate in --webhook-secret")
	fs.BoolVar(&o.assign, "assign-scheduler", false, "also serve the webhook that gives new pods --scheduler-name (the MutatingWebhookConfiguration "+schedulername.ConfigurationName+" says which pods)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, `address of /metrics ("0": none)`)
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", o.healthAddr, `address of /healthz and /readyz ("0": none)`)
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity (klog level)")
	return cmd
}

func runController(o controllerOptions) error {
	if o.webhookPort < 0 || o.webhookPort > 65535 {
		return fmt.Errorf("--webhook-port %d: not a port", o.webhookPort)
	}
	if o.assign && o.webhookPort == 0 {
		return errors.New("--assign-scheduler: needs the webhook (--webhook-port)")
	}
	if err := setupKlog(os.Stderr, o.verbosity); err != nil {
		return err
	}
	defer klog.Flush()
	cfg, err := kubeRESTConfig(o.kubeconfig, "aisched-controller")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	opts := platform.RunOptions{
		Options:     platform.Options{GatewayURL: o.gatewayURL, SchedulerName: o.schedulerName},
		Namespace:   o.namespace,
		MetricsAddr: o.metricsAddr,
		HealthAddr:  o.healthAddr,
	}
	if o.leaderElect {
		opts.LeaderElectionNamespace = o.namespace
	}
	if o.webhookPort > 0 {
		if opts.GetCertificate, err = webhookCertificate(ctx, cfg, o); err != nil || opts.GetCertificate == nil {
			return err
		}
		if opts.WebhookListener, err = net.Listen("tcp", ":"+strconv.Itoa(o.webhookPort)); err != nil {
			return fmt.Errorf("--webhook-port: %w", err)
		}
		opts.AssignScheduler = o.assign
	}
	klog.InfoS("Starting the platform controller", "gatewayURL", o.gatewayURL, "webhookPort", o.webhookPort, "assignScheduler", o.assign, "leaderElection", o.leaderElect)
	if err := platform.Run(ctx, cfg, opts, make(chan struct{})); err != nil {
		return err
	}
	klog.InfoS("Stopped the platform controller")
	return nil
}

// webhookCertificate returns the webhook's serving certificate once it is
// there (platform.ServingCertificate): read from --webhook-cert-dir, or
// kept in --webhook-secret. It returns nil, nil when ctx ends first.
func webhookCertificate(ctx context.Context, cfg *rest.Config, o controllerOptions) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	var certs *platform.WebhookCerts
	if o.webhookCerts == "" {
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		certs = &platform.WebhookCerts{Client: client, Namespace: o.namespace, Service: o.webhookSvc, Secret: o.webhookSecret, Configuration: platform.WebhookConfigurationName}
		if o.assign {
			certs.MutatingConfiguration = schedulername.ConfigurationName
		}
	}
	get, err := platform.ServingCertificate(ctx, o.webhookCerts, certs)
	if err != nil && o.webhookCerts != "" {
		return nil, fmt.Errorf("--webhook-cert-dir: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return get, nil
}

// platformNamespace is where the platform's components run: the pod's
// namespace, else aisched-system.
func platformNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "aisched-system"
}

// Command cert-manager-controller is a minimal, test-only launcher for the
// real cert-manager controllers (library code from
// github.com/cert-manager/cert-manager/pkg/...). It has no leader election,
// no metrics/healthz/pprof servers and no config-file support; it exists so
// integration tests can issue Certificates from CA / SelfSigned issuers
// against a plain kube-apiserver that has cert-manager's CRDs installed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"

	// Controllers register themselves in controller.Known() from init().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// Issuer implementations used by the (cluster)issuers controllers to set
	// the Ready condition; they register via issuer.RegisterIssuer in init().
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// defaultControllers is everything needed for CA / SelfSigned issuance.
// The approver matters: without a True "Approved" condition the signing
// controllers never sign a CertificateRequest.
var defaultControllers = []string{
	"issuers",
	"clusterissuers",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned",
	"certificates-trigger",
	"certificates-issuing",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-readiness",
	"certificates-revision-manager",
}

// clusterScoped controllers are dropped when --namespace is set.
var clusterScoped = map[string]bool{"clusterissuers": true}

type cliOptions struct {
	kubeconfig, master, namespace, clusterResourceNamespace string
	controllers, featureGates                               string
	workers                                                 int
	qps                                                     float64
	burst                                                   int
	ownerRef, listControllers                               bool
	shutdownTimeout                                         time.Duration
}

func parseFlags() *cliOptions {
	o := &cliOptions{}
	fs := flag.CommandLine
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig (empty: in-cluster config / KUBECONFIG).")
	fs.StringVar(&o.master, "master", "", "Optional API server address, overrides the kubeconfig's.")
	fs.StringVar(&o.namespace, "namespace", "", "Watch only this namespace (disables cluster-scoped controllers such as clusterissuers). Empty: all namespaces.")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "cert-manager",
		"Namespace holding Secrets referenced by ClusterIssuers (e.g. a CA ClusterIssuer's spec.ca.secretName).")
	fs.StringVar(&o.controllers, "controllers", strings.Join(defaultControllers, ","),
		"Comma-separated controllers to run; '*' = every compiled-in controller, '-name' disables one.")
	fs.StringVar(&o.featureGates, "feature-gates", "", "cert-manager feature gates, e.g. 'SecretsFilteredCaching=false'.")
	fs.IntVar(&o.workers, "concurrent-workers", 5, "Workers per controller.")
	fs.Float64Var(&o.qps, "kube-api-qps", 20, "Client QPS (ignored when the server has API Priority and Fairness).")
	fs.IntVar(&o.burst, "kube-api-burst", 50, "Client burst (ignored when the server has API Priority and Fairness).")
	fs.BoolVar(&o.ownerRef, "enable-certificate-owner-ref", false, "Make the Certificate an owner of its Secret.")
	fs.BoolVar(&o.listControllers, "list-controllers", false, "Print the compiled-in controller names and exit.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "How long to wait for controllers to stop after a signal.")
	klog.InitFlags(fs) // -v, -logtostderr, ...
	flag.Parse()
	return o
}

// selectControllers resolves the --controllers expression against the
// registered constructors.
func selectControllers(expr, namespace string, known map[string]controller.Constructor) ([]string, error) {
	enabled := map[string]bool{}
	var disabled []string
	for _, raw := range strings.Split(expr, ",") {
		name := strings.TrimSpace(raw)
		switch {
		case name == "":
		case name == "*":
			for n := range known {
				enabled[n] = true
			}
		case strings.HasPrefix(name, "-"):
			disabled = append(disabled, strings.TrimPrefix(name, "-"))
		default:
			if _, ok := known[name]; !ok {
				return nil, fmt.Errorf("unknown controller %q (known: %s)", name, strings.Join(sortedKeys(known), ", "))
			}
			enabled[name] = true
		}
	}
	if len(enabled) == 0 && len(disabled) > 0 { // only "-x" given: implies "*"
		for n := range known {
			enabled[n] = true
		}
	}
	for _, n := range disabled {
		delete(enabled, n)
	}
	if namespace != "" {
		for n := range clusterScoped {
			delete(enabled, n)
		}
	}
	out := make([]string, 0, len(enabled))
	for n := range enabled {
		out = append(out, n)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, errors.New("no controllers enabled")
	}
	return out, nil
}

func sortedKeys(m map[string]controller.Constructor) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// signalContext is cancelled on the first SIGINT/SIGTERM; a second signal
// exits immediately with status 130.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-ch
		logf.Log.Info("received signal, shutting down", "signal", s.String())
		cancel()
		<-ch
		os.Exit(130)
	}()
	return ctx
}

func main() {
	o := parseFlags()
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := run(o); err != nil {
		logf.Log.Error(err, "cert-manager-controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(o *cliOptions) error {
	known := controller.Known()
	if o.listControllers {
		fmt.Println(strings.Join(sortedKeys(known), "\n"))
		return nil
	}
	if o.featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(o.featureGates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	names, err := selectControllers(o.controllers, o.namespace, known)
	if err != nil {
		return err
	}
	if o.clusterResourceNamespace == "" && o.namespace == "" {
		return errors.New("--cluster-resource-namespace must not be empty when watching all namespaces")
	}

	rootCtx := signalContext()
	ctx, cancel := context.WithCancel(logf.NewContext(rootCtx, logf.Log, "controller"))
	defer cancel()
	log := logf.FromContext(ctx)

	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		APIServerHost:      o.master,
		KubernetesAPIQPS:   float32(o.qps),
		KubernetesAPIBurst: o.burst,
		Namespace:          o.namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        o.clusterResourceNamespace,
			ClusterIssuerAmbientCredentials: true, // upstream default; irrelevant for CA/SelfSigned
			IssuerAmbientCredentials:        false,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef: o.ownerRef,
			// Upstream default: copy every annotation except tool-managed ones.
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerKind:                 "Issuer",
			DefaultIssuerGroup:                "cert-manager.io",
			DefaultAutoCertificateAnnotations: []string{"kubernetes.io/tls-acme"},
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: 60},
		ACMEOptions: controller.ACMEOptions{
			DNS01CheckAuthoritative: true,
			DNS01CheckRetryPeriod:   10 * time.Second,
		},
		ConfigOptions: controller.ConfigOptions{EnableGatewayAPI: false},
	})
	if err != nil {
		return fmt.Errorf("building controller context factory: %w", err)
	}
	// The base Context shares its informer factories with every Context the
	// factory builds, so starting these starts the informers controllers use.
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building base controller context: %w", err)
	}

	// Construct every controller first: construction registers the informers
	// it needs with the shared factories.
	type runner struct {
		name string
		c    controller.Interface
	}
	runners := make([]runner, 0, len(names))
	for _, n := range names {
		c, err := known[n](factory)
		if err != nil {
			return fmt.Errorf("constructing controller %q: %w", n, err)
		}
		runners = append(runners, runner{n, c})
	}
	log.Info("starting cert-manager controllers", "controllers", names,
		"namespace", o.namespace, "clusterResourceNamespace", o.clusterResourceNamespace)

	var wg sync.WaitGroup
	errCh := make(chan error, len(runners))
	for _, r := range runners {
		wg.Add(1)
		go func(r runner) {
			defer wg.Done()
			// An error after shutdown began (e.g. caches never synced) is expected.
			if err := r.c.Run(o.workers, ctx); err != nil && ctx.Err() == nil {
				errCh <- fmt.Errorf("controller %q: %w", r.name, err)
				cancel()
			}
		}(r)
	}

	// Start informers only after all controllers were constructed, as
	// upstream does (factories only start informers requested so far).
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	<-ctx.Done()
	log.Info("stopping controllers")
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(o.shutdownTimeout):
		log.Info("timed out waiting for controllers to stop")
	}
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()

	select {
	case err := <-errCh:
		return err
	default:
		return nil
	}
}

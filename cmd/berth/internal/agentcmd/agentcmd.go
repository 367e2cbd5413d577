// Package agentcmd is the command line of the agent role, shared by `berth agent` (the
// all-in-one binary) and the berth-agent binary. It links the agent and the client side of
// the gateway link (h2c, SigV4) only: no etcd, no gateway server (the deps test in
// cmd/berth checks it).
package agentcmd

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/pkg/failover"
	"github.com/berthhq/berth/pkg/pki"
	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/containerdproc"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/tasks"
)

// Command returns the agent command named use ("agent" under berth, "berth-agent" as a
// binary of its own): it registers this host with a cluster through the gateway and runs
// the tasks placed on it until its context is canceled. Unless GOGC is set, it runs the
// garbage collector at GOGC=50 (agentGCPercent).
func Command(use string) *cobra.Command {
	var gatewayURL, cluster, dataDir, containerdAddr, namespace, snapshotter, runcRoot, region, credsFile, logAddr string
	var insecure, attrs, efs []string
	var runContainerd, writableProcSys bool
	var hostAddress string
	var netCfg network.Config
	var files pki.Files
	cmd := &cobra.Command{
		Use:   use,
		Short: "Join this host to a cluster and run its tasks through containerd",
		Long: "Registers this host as a container instance of --cluster through the gateway and\n" +
			"runs the tasks placed on it. Credentials: BERTH_ACCESS_KEY_ID and\n" +
			"BERTH_SECRET_ACCESS_KEY, or --credentials-file with lines KEY=VALUE naming them\n" +
			"(as `berth admin key create --output env` writes).",
		Example: "  " + exampleName(use) + " --gateway http://10.0.0.5:4566 --cluster prod --credentials-file /etc/berth/agent.env",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := cli.JSONLogger(cmd)
			keyID, secret := cli.Env("BERTH_ACCESS_KEY_ID", ""), cli.Env("BERTH_SECRET_ACCESS_KEY", "")
			if credsFile != "" {
				vals, err := cli.ReadEnvFile(credsFile)
				if err != nil {
					return err
				}
				keyID, secret = vals["BERTH_ACCESS_KEY_ID"], vals["BERTH_SECRET_ACCESS_KEY"]
			}
			if keyID == "" || secret == "" {
				return fmt.Errorf("no credentials: set BERTH_ACCESS_KEY_ID and BERTH_SECRET_ACCESS_KEY or --credentials-file")
			}
			attributes, err := parseAttributes(attrs)
			if err != nil {
				return err
			}
			efsMap, err := tasks.ParseEFSMappings(efs)
			if err != nil {
				return err
			}
			setGCDefault()
			gateways, err := gatewayURLs(gatewayURL)
			if err != nil {
				return err
			}
			client, err := cli.HTTPClient(gateways[0], files)
			if err != nil {
				return fmt.Errorf("--gateway: %w", err)
			}
			client.Transport = sigv4client.New(client.Transport, sigv4client.StaticCredentials(keyID, secret), region)
			if len(gateways) > 1 {
				// Over the signer, so each attempt is signed for the gateway it goes to.
				if client.Transport, err = failover.New(client.Transport, gateways); err != nil {
					return fmt.Errorf("--gateway: %w", err)
				}
			}
			abs, err := filepath.Abs(dataDir)
			if err != nil {
				return err
			}
			if writableProcSys {
				if err := remountProcSysWritable(); err != nil {
					return fmt.Errorf("--writable-proc-sys: %w", err)
				}
			}
			if runContainerd {
				// The agent's own containerd decides the socket and snapshotter: a flag
				// naming another is refused rather than dropped.
				for _, name := range []string{"containerd", "snapshotter"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--run-containerd and --%s: the agent's own containerd has its own %s; give one or the other", name, name)
					}
				}
				// A containerd of the agent's own (as `berth dev` runs one): root, state,
				// config and socket under <data-dir>/containerd.
				inst, err := containerdproc.StartProcess(cmd.Context(), filepath.Join(abs, "containerd"))
				if err != nil {
					return fmt.Errorf("--run-containerd: %w", err)
				}
				log.Info("started the agent's own containerd", "address", inst.Address(), "snapshotter", inst.Snapshotter())
				defer func() {
					stop, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 15*time.Second)
					defer cancel()
					_ = inst.Stop(stop)
				}()
				containerdAddr, snapshotter = inst.Address(), inst.Snapshotter()
				if runcRoot == "" {
					runcRoot = inst.RuncRoot() // its containers' runc state beside it, as under berth dev
				}
			}
			// One line per piece of the runtime this host lacks; the agent runs with the rest.
			if netCfg.DNSTarget, err = resolveDNSTarget(cmd.Context(), netCfg.DNSTarget); err != nil {
				return err
			}
			for _, l := range agent.CheckHost(containerdAddr, netCfg.PluginDirs) {
				fmt.Fprintln(cmd.ErrOrStderr(), exampleName(use)+": "+l)
			}
			// With TLS material the log service is mTLS too: only client, admin and
			// gateway certificates read the host's task output (docs/security.md).
			var logTLS *tls.Config
			var logAuth func(*tls.ConnectionState) bool
			if files.Cert != "" {
				if logTLS, err = files.ServerConfig(tls.RequireAndVerifyClientCert); err != nil {
					return fmt.Errorf("log service TLS: %w", err)
				}
				logAuth = LogReader
			}
			// Registries serving a certificate of the deployment's CA (Berth's ECR
			// registry behind `berth scheduler --tls-cert`) are trusted as the gateway is.
			registryRoots, err := registryRootCAs(files.CA)
			if err != nil {
				return err
			}
			ag, err := agent.New(agent.Config{
				RegistryRootCAs:    registryRoots,
				ControlPlaneURL:    gateways[0],
				HTTPClient:         client,
				Cluster:            cluster,
				DataDir:            abs,
				ContainerdAddress:  containerdAddr,
				Namespace:          namespace,
				Snapshotter:        snapshotter,
				RuncRoot:           runcRoot,
				InsecureRegistries: insecure,
				EFS:                efsMap,
				Attributes:         attributes,
				HostAddress:        hostAddress,
				LogAddr:            logAddr,
				LogTLS:             logTLS,
				LogAuthorize:       logAuth,
				Network:            netCfg,
				Logger:             log,
				Registry:           cli.NewRegistry(), // /metrics on the LogService listener
			})
			if err != nil {
				return err
			}
			return cli.IgnoreCanceled(cmd.Context(), ag.Run(cmd.Context()))
		},
	}
	f := cmd.Flags()
	cli.AddTLSFlags(f, &files, "the agent presents to the gateway (role agent; mTLS with an https:// --gateway)")
	f.StringVar(&gatewayURL, "gateway", cli.Env("BERTH_GATEWAY_URL", "http://127.0.0.1:4566"), "the gateway's URL, or several comma-separated (one scheme): the agent spreads its calls over them and moves to another when one cannot be reached")
	f.StringVar(&cluster, "cluster", cli.Env("BERTH_CLUSTER", "default"), "cluster to join")
	f.StringVar(&dataDir, "data-dir", cli.Env("BERTH_DATA_DIR", "./.berth/agent"), "agent state, logs and FIFOs")
	f.StringVar(&containerdAddr, "containerd", cli.Env("BERTH_CONTAINERD_ADDRESS", "/run/containerd/containerd.sock"), "containerd socket")
	f.StringVar(&namespace, "namespace", cli.Env("BERTH_CONTAINERD_NAMESPACE", "berth"), "containerd namespace of this agent's containers")
	f.BoolVar(&writableProcSys, "writable-proc-sys", cli.Env("BERTH_WRITABLE_PROC_SYS", "") == "true", "remount /proc/sys read-write at start (an agent in a container whose engine mounts it read-only, as deploy/compose.yaml's: networkMode bridge's portmap plugin writes sysctls of the agent's network namespace); needs CAP_SYS_ADMIN")
	f.BoolVar(&runContainerd, "run-containerd", cli.Env("BERTH_RUN_CONTAINERD", "") == "true", "run a containerd of the agent's own under <data-dir>/containerd (needs root and the containerd, containerd-shim-runc-v2 and runc binaries in PATH); not with --containerd or --snapshotter")
	f.StringVar(&runcRoot, "runc-root", cli.Env("BERTH_RUNC_ROOT", ""), "runc's state directory for this agent's containers (empty: runc's default /run/containerd/runc); give each private containerd its own")
	f.StringVar(&snapshotter, "snapshotter", cli.Env("BERTH_CONTAINERD_SNAPSHOTTER", "overlayfs"), "containerd snapshotter for images and root filesystems")
	f.StringVar(&region, "region", cli.Env("BERTH_REGION", "us-east-1"), "region this host's agent registers and signs in; its tasks come from that region's clusters only")
	f.StringVar(&credsFile, "credentials-file", cli.Env("BERTH_CREDENTIALS_FILE", ""), "file with BERTH_ACCESS_KEY_ID= and BERTH_SECRET_ACCESS_KEY= lines")
	f.StringVar(&logAddr, "log-addr", cli.Env("BERTH_AGENT_LOG_ADDR", ""), "address of the agent's LogService (empty: loopback, any port); with --tls-cert it serves mTLS to client, admin and gateway certificates")
	f.StringSliceVar(&efs, "efs", cli.SplitList(cli.Env("BERTH_EFS", "")), EFSFlagUsage)
	f.StringSliceVar(&insecure, "insecure-registry", nil, "plain-HTTP registry host:port (repeatable); loopback ones always are")
	var envAttrs []string
	if v := cli.Env("BERTH_INSTANCE_ATTRIBUTES", ""); v != "" {
		envAttrs = strings.Split(v, ",")
	}
	f.StringSliceVar(&attrs, "attribute", envAttrs, "custom attribute of this container instance, name=value (repeatable; env BERTH_INSTANCE_ATTRIBUTES, comma-separated), e.g. berth.capacity-provider=spot-pool or berth.fargate=false (docs/capacity-providers.md)")
	f.StringSliceVar(&netCfg.PluginDirs, "cni-plugin-dir", cli.SplitList(cli.Env("BERTH_CNI_PLUGIN_DIR", network.DefaultPluginDir+",/opt/cni/bin")), "directories searched for the CNI plugins (bridge, host-local, portmap, firewall, loopback)")
	f.StringVar(&netCfg.BridgeSubnet, "bridge-subnet", cli.Env("BERTH_BRIDGE_SUBNET", network.DefaultBridgeSubnet), "IPv4 subnet of networkMode bridge containers on this host")
	f.StringVar(&hostAddress, "host-address", cli.Env("BERTH_HOST_ADDRESS", ""), "IPv4 address the cluster's other hosts reach this host at: they route its awsvpc task subnet through it and load balancers reach its bridge and host mode tasks there (default: the address this host reaches the gateway from; docs/networking.md)")
	f.StringVar(&netCfg.TaskSubnet, "task-subnet", cli.Env("BERTH_TASK_SUBNET", ""), "IPv4 subnet of this host's awsvpc tasks (default: the /24 the control plane allocates at registration)")
	f.StringVar(&netCfg.DNSTarget, "dns-target", cli.Env("BERTH_DNS_TARGET", ""), "host:port of the Cloud Map DNS server (berth dns) that bridge and awsvpc tasks reach on 169.254.169.253:53; a name is resolved to its IPv4 address once, at start (empty: tasks keep the host's resolvers)")
	return cmd
}

// EFSFlagUsage documents --efs of `berth agent` and `berth dev`.
const EFSFlagUsage = "EFS file system mapping, fs-ID=HOST:/EXPORT (an NFSv4.1 export the agent mounts for tasks' efsVolumeConfiguration volumes) or fs-ID=/PATH (a directory of this host, bind-mounted: the single-host form); repeatable (env BERTH_EFS, comma-separated). Tasks naming an unmapped file system fail with ResourceInitializationError (docs/efs.md)"

// LogReader reports whether a connection to the agent's log service may read task output:
// its client presented a verified certificate with the client, admin or gateway role
// (agent and scheduler certificates may not; a plain connection never may).
func LogReader(cs *tls.ConnectionState) bool {
	return pki.PeerHasRole(cs, pki.RoleClient) || pki.PeerHasRole(cs, pki.RoleAdmin) || pki.PeerHasRole(cs, pki.RoleGateway)
}

// parseAttributes turns --attribute values (name=value, or a bare name for a valueless
// attribute) into the agent's custom attributes.
func parseAttributes(vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		name, value, _ := strings.Cut(strings.TrimSpace(v), "=")
		if name == "" {
			return nil, fmt.Errorf("--attribute %q: want name=value", v)
		}
		out[name] = value
	}
	return out, nil
}

// agentGCPercent is the agent's GOGC unless the environment sets one: the agent's heap
// is small and mostly long-lived (task state, protobuf messages, containerd clients), so
// collecting at 50% growth instead of 100% keeps its resident memory lower (bench:
// 40.3 → 36.8 MiB with 50 tasks) for GC work an idle host does not notice.
const agentGCPercent = 50

// setGCDefault applies agentGCPercent unless GOGC is set.
func setGCDefault() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(agentGCPercent)
	}
}

// exampleName is how a user invokes the command named use: "berth agent" for the
// subcommand, the binary's name otherwise.
func exampleName(use string) string {
	if use == "agent" {
		return "berth agent"
	}
	return use
}

// gatewayURLs splits --gateway's comma-separated list of gateway base URLs. It fails on
// an empty list, a URL without scheme or host, or a mix of http:// and https:// (one
// HTTP client, with or without TLS, serves them all).
func gatewayURLs(flag string) ([]string, error) {
	urls := cli.SplitList(flag)
	if len(urls) == 0 {
		return nil, errors.New("--gateway: no URL")
	}
	scheme := ""
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("--gateway: %q: want http://host:port or https://host:port", u)
		}
		if scheme = cmp.Or(scheme, p.Scheme); p.Scheme != scheme {
			return nil, fmt.Errorf("--gateway: %q and %q: every gateway URL needs the same scheme", urls[0], u)
		}
	}
	return urls, nil
}

// resolveDNSTarget returns target ("host:port" of the Cloud Map DNS server) with its host
// resolved to an IPv4 address, which the agent's iptables rules need. A name is looked up
// for up to 30 s (under compose the DNS server's container may be starting); "" stays "".
// The address is taken once: an agent whose DNS server moves is restarted.
func resolveDNSTarget(ctx context.Context, target string) (string, error) {
	if target == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("--dns-target %q: want host:port: %w", target, err)
	}
	if net.ParseIP(host) != nil {
		return target, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host)
		if err == nil && len(ips) > 0 {
			return net.JoinHostPort(ips[0].String(), port), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("--dns-target %q: %s does not resolve to an IPv4 address: %v", target, host, err)
		case <-time.After(time.Second):
		}
	}
}

// registryRootCAs returns the roots image pulls verify registries with: the system roots
// plus the CA certificates in caFile; nil (the system roots alone) when caFile is "".
func registryRootCAs(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

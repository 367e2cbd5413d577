package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/pki"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

// loadKeyring reads the secrets keyring from path, else from BERTH_SECRETS_KEY; nil when
// neither is set.
func loadKeyring(path string) (*seal.Keyring, error) {
	if path != "" {
		return seal.Load(path)
	}
	if v := os.Getenv("BERTH_SECRETS_KEY"); v != "" {
		k, err := seal.Parse(v)
		if err != nil {
			return nil, fmt.Errorf("BERTH_SECRETS_KEY: %w", err)
		}
		return k, nil
	}
	return nil, nil
}

func schedulerCommand() *cobra.Command {
	var listen, region, replica, keyFile string
	var etcdf etcdFlags
	var leaderTTL, stableAfter, credsLifetime time.Duration
	var logDir, logPeerURL, metricsDir string
	var metricsRetention time.Duration
	var maxTxnOps, gzipMinBytes int
	var taskSubnetPool string
	var ecrf ecrFlags
	var files pki.Files
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run a scheduler replica against an etcd cluster",
		Long: "Serves the internal Connect APIs (ECS, agent sessions, admin) on --listen over TLS\n" +
			"(--tls-*; mTLS with gateways and admins) or, without them, h2c for a loopback or\n" +
			"private network; the admin bootstrap token is printed once at the first start\n" +
			"(or taken from BERTH_ADMIN_TOKEN). It campaigns for leadership; the leader runs placement, service reconciliation\n" +
			"and the reaper. Run any number of replicas against one etcd cluster.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := cli.JSONLogger(cmd)
			var serverTLS *tls.Config
			if files.Cert != "" || files.Key != "" || files.CA != "" {
				if files.CA == "" {
					return fmt.Errorf("--tls-cert needs --tls-ca: the scheduler verifies client certificates (gateways, admins)")
				}
				var err error
				if serverTLS, err = files.ServerConfig(tls.VerifyClientCertIfGiven); err != nil {
					return err
				}
			}
			etcd, err := etcdf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer etcd.Close()
			if err := probeEtcd(cmd.Context(), etcd, etcdf.endpoints, log); err != nil {
				return err
			}
			keyring, err := loadKeyring(keyFile)
			if err != nil {
				return err
			}
			if keyring == nil {
				log.Warn("no secrets key: Secrets Manager and SSM Parameter Store are disabled (set --secrets-key-file or BERTH_SECRETS_KEY)")
			}
			logStore, err := logstore.Open(logstore.Config{Dir: logDir})
			if err != nil {
				return err
			}
			defer logStore.Close()
			metricStore, err := metricstore.OpenTSDB(metricsDir, metricsRetention, log.With("component", "metricstore"))
			if err != nil {
				return err
			}
			defer metricStore.Close()
			cfg := app.Config{Keyring: keyring, Logs: logStore, Metrics: metricStore, Etcd: etcd, Region: region, Logger: log, Replica: replica, LeaderTTL: leaderTTL,
				Registry: cli.NewRegistry(), TaskStableAfter: stableAfter, // /metrics on the internal listener
				MaxTxnOps: maxTxnOps, GzipMinBytes: gzipMinBytes, TaskSubnetPool: taskSubnetPool, TaskCredentialsLifetime: credsLifetime}
			if serverTLS != nil {
				cfg.PeerOf = tlsPeer
			}
			// The ECR registry (docs/ecr.md): its listener opens before the app so the app
			// knows the host of every repositoryUri.
			ecrLn, err := ecrf.listen(keyring)
			var ecrTLS *tls.Config // nil: the registry serves plain HTTP
			if err != nil {
				return err
			}
			if ecrLn != nil {
				defer ecrLn.Close()
				cfg.ECRRegistryHost, cfg.ECRBlobDir = ecrf.host(ecrLn), ecrf.blobDir
				if serverTLS != nil {
					// With --tls-cert the registry serves HTTPS with the scheduler's
					// certificate (its SANs must name --ecr-host), asking for no client
					// certificate: docker and agents sign in with ECR tokens instead.
					if ecrTLS, err = files.ServerConfig(tls.NoClientCert); err != nil {
						return fmt.Errorf("ECR registry: %w", err)
					}
					cfg.ECRRegistryHTTPS = true
				}
			}
			if cfg.LogPeerURL, err = peerURL(logPeerURL, listen, serverTLS != nil); err != nil {
				return err
			}
			if serverTLS != nil && cfg.LogPeerURL != "" {
				clientTLS, err := files.ClientConfig()
				if err != nil {
					return fmt.Errorf("log store peers: %w", err)
				}
				cfg.LogPeerClient = &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16}}
			} else if cfg.LogPeerURL != "" {
				cfg.LogPeerClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			}
			a, err := app.New(cfg)
			if err != nil {
				return err
			}
			if err := a.MigrateLayout(cmd.Context()); err != nil {
				return err
			}
			token, created, err := a.Bootstrap(cmd.Context(), os.Getenv("BERTH_ADMIN_TOKEN"))
			if err != nil {
				return fmt.Errorf("admin bootstrap token: %w", err)
			}
			if created && os.Getenv("BERTH_ADMIN_TOKEN") == "" {
				// Printed once, to the terminal and never to the log: it is not stored
				// anywhere but as a hash.
				fmt.Fprintf(cmd.ErrOrStderr(), "\nAdmin bootstrap token (shown once; `berth admin --token` or BERTH_ADMIN_TOKEN):\n\n    %s\n\n", token)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			errc := make(chan error, 3)
			if serverTLS != nil {
				log.Info("scheduler listening", "addr", ln.Addr().String(), "etcd", etcdf.endpoints, "tls", true)
				go func() { errc <- h2c.ServeTLS(ctx, ln, a.Handler(), serverTLS) }()
			} else {
				log.Warn("scheduler serving h2c without TLS: whoever reaches --listen can act for any account; keep it on loopback or a network only gateways reach", "addr", ln.Addr().String())
				log.Info("scheduler listening", "addr", ln.Addr().String(), "etcd", etcdf.endpoints, "tls", false)
				go func() { errc <- h2c.Serve(ctx, ln, a.Handler()) }()
			}
			go func() { errc <- a.Run(ctx) }()
			if ecrLn != nil {
				if err := serveECR(ctx, ecrLn, ecrTLS, etcd, keyring, cfg.ECRRegistryHost, ecrf.blobDir, log, errc); err != nil {
					return err
				}
			}
			err = <-errc
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&metricsDir, "metrics-dir", cli.Env("BERTH_METRICS_DIR", "./.berth/cwmetrics"), "directory of the CloudWatch metric store (PutMetricData and the AWS/ECS metrics); see docs/cloudwatch.md")
	f.DurationVar(&metricsRetention, "metrics-retention", metricstore.DefaultRetention, "how long CloudWatch metric data is kept (CloudWatch keeps 1-minute data 15 days)")
	f.StringVar(&logDir, "log-dir", cli.Env("BERTH_LOG_DIR", "./.berth/cwlogs"), "directory of the CloudWatch Logs store (awslogs output and the logs API); on a disk that outlives the replica, see docs/logs.md")
	f.StringVar(&logPeerURL, "log-peer-url", cli.Env("BERTH_LOG_PEER_URL", ""), "base URL the other scheduler replicas reach this one at for the replicated log store (default: http(s)://--listen, with the host name when it listens on all addresses); \"none\" keeps the log store to this replica (docs/logs.md)")
	etcdf.add(f)
	ecrf.add(f)
	cli.AddTLSFlags(f, &files, "the scheduler serves with (role scheduler); client certificates are verified against --tls-ca, identity headers count only from gateway-role ones and AdminService needs an admin-role one or --token")
	f.StringVar(&listen, "listen", cli.Env("BERTH_SCHEDULER_ADDR", "127.0.0.1:4567"), "address of the internal Connect listener (h2c)")
	f.StringVar(&region, "region", cli.Env("BERTH_REGION", "us-east-1"), "default region: ECS state from builds without regions is moved into it once at start (requests are served in the region they are signed for)")
	f.StringVar(&keyFile, "secrets-key-file", cli.Env("BERTH_SECRETS_KEY_FILE", ""), "key file sealing secret and parameter values at rest: lines {id}:{base64 of 32 bytes}, primary first (docs/secrets.md); BERTH_SECRETS_KEY may hold the same lines comma-separated instead")
	f.StringVar(&replica, "replica", cli.Env("BERTH_REPLICA", ""), "replica name (default host-pid)")
	f.DurationVar(&credsLifetime, "task-credentials-lifetime", 0, "how long task role credentials are accepted; agents refresh them at half of it (0: 1h)")
	f.DurationVar(&leaderTTL, "leader-ttl", 5*time.Second, "leader election session TTL")
	f.StringVar(&taskSubnetPool, "task-subnet-pool", cli.Env("BERTH_TASK_SUBNET_POOL", control.DefaultTaskSubnetPool), "IPv4 range the container instances' awsvpc task subnets (a /24 each) are allocated from")
	f.DurationVar(&stableAfter, "task-stable-after", 0, "how long a service task without health checks stays RUNNING before it counts toward minimumHealthyPercent (0: 40s, as AWS)")
	f.IntVar(&maxTxnOps, "etcd-max-txn-ops", 128, "the etcd cluster's --max-txn-ops (etcd's default: 128); RunTask's group commit fills txns up to it, so raise both together (1024 holds about a dozen RunTask calls of count 10 per txn)")
	f.IntVar(&gzipMinBytes, "gzip-min-bytes", 0, "gzip responses of at least this many bytes to clients that accept gzip (the gateway and agents); 0 never compresses, which costs least CPU on internal links")
	return cmd
}

// probeEtcdTLS makes one TLS connection to each etcd endpoint with the scheduler's etcd
// client configuration (when it has one) and reports the first one whose member refuses
// it: no client certificate when etcd runs with --client-cert-auth, a certificate of
// another CA, a server certificate the CA does not verify. etcd refuses a TLS 1.3 client
// only after the handshake, with an alert the first read returns, so it reads briefly: a
// member that accepted the client waits for its HTTP/2 preface and the read times out. An
// endpoint that does not answer at all is left to probeEtcd (a cluster still forming).
func probeEtcdTLS(ctx context.Context, cfg clientv3.Config) error {
	if cfg.TLS == nil {
		return nil
	}
	for _, ep := range cfg.Endpoints {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg.TLS}
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			if isTLSRefusal(err) {
				return fmt.Errorf("etcd %s refused the TLS handshake (check --etcd-cacert, --etcd-cert, --etcd-key): %w", ep, err)
			}
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if err != nil && isTLSRefusal(err) {
			return fmt.Errorf("etcd %s refused the TLS handshake (check --etcd-cacert, --etcd-cert, --etcd-key): %w", ep, err)
		}
	}
	return nil
}

// isTLSRefusal reports whether err is a TLS alert or certificate verification failure.
func isTLSRefusal(err error) bool {
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	return errors.As(err, &alert) || errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		strings.Contains(err.Error(), "remote error: tls:")
}

// etcdProbeWindow bounds how long a starting replica waits for etcd to answer.
const etcdProbeWindow = 60 * time.Second

// probeEtcd reads one key from etcd before the replica starts, so a refused TLS handshake
// (no client certificate, a wrong CA) ends the command at once with etcd's reason instead
// of every later request waiting on a connection that never becomes ready. Other failures
// (a cluster still forming) are retried for etcdProbeWindow, each logged.
func probeEtcd(ctx context.Context, etcd *clientv3.Client, endpoints string, log *slog.Logger) error {
	deadline := time.Now().Add(etcdProbeWindow)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := etcd.Get(pctx, "/berth/v1/layout", clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return nil
		}
		msg := err.Error()
		if strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate") || strings.Contains(msg, "authentication handshake failed") {
			return fmt.Errorf("etcd %s refused the TLS handshake (check --etcd-cacert, --etcd-cert, --etcd-key): %w", endpoints, err)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("etcd %s: not answering after %s: %w", endpoints, etcdProbeWindow, err)
		}
		log.Warn("etcd not answering yet", "endpoints", endpoints, "err", err)
		time.Sleep(time.Second)
	}
}

// tlsPeer is what a scheduler request's verified client certificate proves.
func tlsPeer(r *http.Request) caller.Peer {
	return caller.Peer{
		Gateway:   pki.PeerHasRole(r.TLS, pki.RoleGateway),
		Admin:     pki.PeerHasRole(r.TLS, pki.RoleAdmin),
		Scheduler: pki.PeerHasRole(r.TLS, pki.RoleScheduler),
	}
}

// peerURL returns the log store peer URL of a replica listening on listen: flag when
// set ("none": no peers), else http(s)://listen, with this host's name for an
// all-addresses listener.
func peerURL(flag, listen string, tls bool) (string, error) {
	switch flag {
	case "none":
		return "", nil
	case "":
	default:
		return strings.TrimSuffix(flag, "/"), nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("log store peer URL: %w (set --log-peer-url)", err)
		}
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

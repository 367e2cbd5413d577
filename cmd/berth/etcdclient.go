package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
)

// etcdFlags are the etcd client flags every role that reads etcd shares (scheduler, lb,
// dns): the endpoints and, as etcdctl names them, the TLS files.
type etcdFlags struct {
	endpoints string
	tls       transport.TLSInfo
}

// add defines --etcd-endpoints, --etcd-cacert, --etcd-cert and --etcd-key on f.
func (e *etcdFlags) add(f *pflag.FlagSet) {
	f.StringVar(&e.endpoints, "etcd-endpoints", cli.Env("BERTH_ETCD_ENDPOINTS", "127.0.0.1:2379"), "etcd client endpoints, comma-separated (https://host:port with the TLS flags)")
	f.StringVar(&e.tls.TrustedCAFile, "etcd-cacert", cli.Env("BERTH_ETCD_CACERT", ""), "verify etcd's server certificate with this CA bundle (etcdctl's --cacert)")
	f.StringVar(&e.tls.CertFile, "etcd-cert", cli.Env("BERTH_ETCD_CERT", ""), "client certificate for etcd (etcdctl's --cert)")
	f.StringVar(&e.tls.KeyFile, "etcd-key", cli.Env("BERTH_ETCD_KEY", ""), "client key for etcd (etcdctl's --key)")
}

// config returns the etcd client configuration of the flags: TLS when any TLS file is
// given (etcd's own TLSInfo reads the client key pair at each handshake, so a rotated
// etcd client certificate is used without a restart).
func (e *etcdFlags) config() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: strings.Split(e.endpoints, ","), DialTimeout: 5 * time.Second}
	if !e.tls.Empty() || e.tls.TrustedCAFile != "" {
		c, err := e.tls.ClientConfig()
		if err != nil {
			return cfg, fmt.Errorf("etcd TLS: %w", err)
		}
		cfg.TLS = c
	}
	return cfg, nil
}

// dial returns a client of the flags' etcd, having checked that no member refuses its
// TLS handshake (probeEtcdTLS), so a wrong certificate stops the role at once with a
// clear error instead of retrying in the background.
func (e *etcdFlags) dial(ctx context.Context) (*clientv3.Client, error) {
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	if err := probeEtcdTLS(ctx, cfg); err != nil {
		return nil, err
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", e.endpoints, err)
	}
	return c, nil
}

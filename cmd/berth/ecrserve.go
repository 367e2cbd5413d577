package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/scheduler/ecr"
	ecrregistry "github.com/berthhq/berth/services/scheduler/ecr/registry"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

// ecrFlags are `berth scheduler`'s flags of the ECR registry (docs/ecr.md).
type ecrFlags struct {
	addr, advertise, blobDir string
}

func (e *ecrFlags) add(f *pflag.FlagSet) {
	f.StringVar(&e.addr, "ecr-listen", cli.Env("BERTH_ECR_ADDR", ""), "address the ECR registry (docker login/push/pull, docs/ecr.md) listens on: HTTPS with the scheduler's --tls-cert when it has one, else plain HTTP; empty: no registry, and the ECR API answers that it is disabled. Needs --secrets-key-file (its tokens are sealed with it)")
	f.StringVar(&e.advertise, "ecr-host", cli.Env("BERTH_ECR_HOST", ""), "host[:port] clients reach the registry at: the host of every repositoryUri and of GetAuthorizationToken's proxyEndpoint (default: --ecr-listen's address, with this host's name when it listens on all addresses)")
	f.StringVar(&e.blobDir, "ecr-blob-dir", cli.Env("BERTH_ECR_BLOB_DIR", "./.berth/ecr/blobs"), "directory of the registry's blobs (layers, configs) and of ECR's layer uploads; on a disk that outlives the replica")
}

// listen opens the registry's listener; nil when --ecr-listen is empty.
func (e *ecrFlags) listen(ring *seal.Keyring) (net.Listener, error) {
	if e.addr == "" {
		return nil, nil
	}
	if ring == nil {
		return nil, fmt.Errorf("--ecr-listen needs --secrets-key-file or BERTH_SECRETS_KEY: the registry's tokens are sealed with that key")
	}
	if err := os.MkdirAll(e.blobDir, 0o755); err != nil {
		return nil, fmt.Errorf("--ecr-blob-dir: %w", err)
	}
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return nil, fmt.Errorf("--ecr-listen %s: %w", e.addr, err)
	}
	return ln, nil
}

// host returns the registry's host as clients name it: --ecr-host, else the listener's
// address (this host's name in place of an all-addresses IP).
func (e *ecrFlags) host(ln net.Listener) string {
	if e.advertise != "" {
		return e.advertise
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// serveECR serves the ECR registry on ln (HTTPS with tlsConfig when it is not nil) until ctx ends (a serving error goes to errc),
// and runs its background pass (lifecycle policies, garbage collection) every 10
// minutes, as `berth dev` does.
func serveECR(ctx context.Context, ln net.Listener, tlsConfig *tls.Config, etcd *clientv3.Client, ring *seal.Keyring, host, dir string, log *slog.Logger, errc chan<- error) error {
	reg, err := ecrregistry.New(ecrregistry.Config{Store: ecr.NewStore(etcd, ring, host, nil), Dir: dir, Logger: log.With("service", "ecr-registry")})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: reg, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig}
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Info("ecr registry listening", "addr", ln.Addr().String(), "host", host, "blobs", dir, "tls", tlsConfig != nil)
	go func() {
		serve := func() error { return srv.Serve(ln) }
		if tlsConfig != nil {
			serve = func() error { return srv.ServeTLS(ln, "", "") }
		}
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("ecr registry: %w", err)
		}
	}()
	go reg.RunBackground(ctx, 10*time.Minute)
	return nil
}

package cli

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/pflag"

	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/pki"
)

// AddTLSFlags registers --tls-ca, --tls-cert and --tls-key (defaults from BERTH_TLS_CA,
// BERTH_TLS_CERT, BERTH_TLS_KEY) into files; what says in the help what the certificate
// is for.
func AddTLSFlags(f *pflag.FlagSet, files *pki.Files, what string) {
	f.StringVar(&files.CA, "tls-ca", Env("BERTH_TLS_CA", ""), "PEM CA bundle that verifies peers (berth-ca.pem from `berth tls ca create`)")
	f.StringVar(&files.Cert, "tls-cert", Env("BERTH_TLS_CERT", ""), "PEM certificate "+what+" (reloaded when the file changes)")
	f.StringVar(&files.Key, "tls-key", Env("BERTH_TLS_KEY", ""), "PEM private key of --tls-cert (reloaded when the file changes)")
}

// HTTPClient returns the HTTP/2 client for a Berth URL: h2c for http://, TLS for
// https:// verifying the server against files.CA and presenting files.Cert/Key when set
// (mTLS). It refuses TLS files with an http:// URL, which would silently not use them.
func HTTPClient(url string, files pki.Files) (*http.Client, error) {
	if !strings.HasPrefix(url, "https://") {
		if files.Enabled() {
			return nil, fmt.Errorf("TLS files given but %s is not https://", url)
		}
		return h2c.NewClient(), nil
	}
	cfg, err := files.ClientConfig()
	if err != nil {
		return nil, err
	}
	return h2c.NewTLSClient(cfg), nil
}

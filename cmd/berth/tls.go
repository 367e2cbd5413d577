package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthhq/berth/pkg/pki"
)

// File names `berth tls` writes, as `nomad tls` names its own (nomad-agent-ca.pem, …).
const (
	caCertFile = "berth-ca.pem"
	caKeyFile  = "berth-ca-key.pem"
)

// tlsCommand is `berth tls`: a private CA and role certificates for a Berth deployment,
// modelled on `nomad tls`.
func tlsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create a private CA and the certificates of gateways, schedulers, agents, clients and admins",
		Long: "berth tls ca create writes berth-ca.pem and berth-ca-key.pem (ECDSA P-256).\n" +
			"berth tls cert create --role ROLE signs berth-ROLE.pem and berth-ROLE-key.pem with\n" +
			"that CA (berth-ROLE-1.pem, … when the name is taken). The role is written into the\n" +
			"certificate (URI SAN urn:berth:role:ROLE): the scheduler believes identity headers only\n" +
			"from a gateway certificate, authorizes AdminService for an admin one, and a gateway\n" +
			"run with --require-agent-cert relays the agent API only for agent ones.\n" +
			"Keep berth-ca-key.pem offline: whoever holds it can mint any role.",
	}
	var dir, commonName string
	var days int
	caCreate := &cobra.Command{
		Use:   "create",
		Short: "Create the CA: berth-ca.pem (distribute) and berth-ca-key.pem (keep secret)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			crt, key, err := pki.CreateCA(pki.CAOptions{CommonName: commonName, Validity: time.Duration(days) * 24 * time.Hour})
			if err != nil {
				return err
			}
			if err := writeNew(filepath.Join(dir, caCertFile), crt, 0o644); err != nil {
				return err
			}
			if err := writeNew(filepath.Join(dir, caKeyFile), key, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "==> CA certificate saved to: %s\n==> CA key saved to: %s\n",
				filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile))
			return nil
		},
	}
	caCreate.Flags().StringVar(&dir, "dir", ".", "directory to write the files to")
	caCreate.Flags().StringVar(&commonName, "common-name", "Berth CA", "the CA's subject common name")
	caCreate.Flags().IntVar(&days, "days", int(pki.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	ca := &cobra.Command{Use: "ca", Short: "Manage the CA"}
	ca.AddCommand(caCreate)

	var role, caPath, caKeyPath, certDir, certCN string
	var dnsNames []string
	var ips []net.IP
	var certDays int
	certCreate := &cobra.Command{
		Use:   "create",
		Short: "Create a role certificate signed by the CA: berth-ROLE.pem and berth-ROLE-key.pem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := pki.ParseRole(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			caCrt, err := os.ReadFile(caPath)
			if err != nil {
				return fmt.Errorf("--ca: %w (create one with `berth tls ca create`)", err)
			}
			caKey, err := os.ReadFile(caKeyPath)
			if err != nil {
				return fmt.Errorf("--key: %w", err)
			}
			crt, key, err := pki.CreateCert(caCrt, caKey, pki.CertOptions{Role: r, CommonName: certCN, DNSNames: dnsNames, IPs: ips,
				Validity: time.Duration(certDays) * 24 * time.Hour})
			if err != nil {
				return err
			}
			base := filepath.Join(certDir, "berth-"+string(r))
			for i := 1; ; i++ {
				if _, err := os.Stat(base + ".pem"); errors.Is(err, fs.ErrNotExist) {
					break
				}
				base = filepath.Join(certDir, fmt.Sprintf("berth-%s-%d", r, i))
			}
			if err := writeNew(base+".pem", crt, 0o644); err != nil {
				return err
			}
			if err := writeNew(base+"-key.pem", key, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "==> %s certificate saved to: %s.pem\n==> %s key saved to: %s-key.pem\n", r, base, r, base)
			return nil
		},
	}
	f := certCreate.Flags()
	f.StringVar(&role, "role", "", "gateway, scheduler, agent, client or admin (required)")
	f.StringVar(&caPath, "ca", caCertFile, "the CA certificate")
	f.StringVar(&caKeyPath, "key", caKeyFile, "the CA's private key")
	f.StringVar(&certDir, "dir", ".", "directory to write the files to")
	f.StringVar(&certCN, "common-name", "", "subject common name (default ROLE.berth)")
	f.StringSliceVar(&dnsNames, "dns", nil, "extra DNS subject alternative name (repeatable); gateway and scheduler certificates always name localhost and ROLE.berth")
	f.IPSliceVar(&ips, "ip", nil, "extra IP subject alternative name (repeatable); gateway and scheduler certificates always name 127.0.0.1 and ::1")
	f.IntVar(&certDays, "days", int(pki.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid (never past the CA's end)")
	_ = certCreate.MarkFlagRequired("role")
	cert := &cobra.Command{Use: "cert", Short: "Manage role certificates"}
	cert.AddCommand(certCreate)

	cmd.AddCommand(ca, cert)
	return cmd
}

// writeNew writes b to a new file at path with perm; an existing file is an error, never
// overwritten.
func writeNew(path string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

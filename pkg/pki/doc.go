// Package pki is Berth's certificate tooling and TLS plumbing: it creates a private CA and
// role certificates (ECDSA P-256, crypto/x509; `berth tls` drives it, as `nomad tls` does
// for Nomad), reads a certificate's Berth roles back out of it, and builds tls.Configs
// whose key pairs and CA bundles reload from their files when they change, so
// certificates rotate without a restart. Every Berth process (gateway, scheduler, agent,
// the CLI) links it; it links nothing of theirs.
package pki

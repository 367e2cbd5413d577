#!/bin/sh
# Stages the compose stack's image contents in deploy/.build: static berth, berth-agent,
# berth-gateway and etcd binaries (CGO_ENABLED=0, from this checkout and the Go module proxy) and the host's CA
# certificates. Then `docker-compose -f deploy/compose.yaml build` needs no registry.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/.build"
cd "$here/.."
for bin in berth berth/berth-agent berth/berth-gateway; do
	CGO_ENABLED=0 go build -trimpath -o "$here/.build/" "./cmd/$bin"
done
cd "$here/etcd"
CGO_ENABLED=0 GOWORK=off go build -trimpath -o "$here/.build/etcd" .
cp /etc/ssl/certs/ca-certificates.crt "$here/.build/ca-certificates.crt"
# The stack's TLS material (docs/security.md), made once and kept across builds: a private
# CA and one certificate per role, in deploy/.build/tls (mounted read-only at /tls). The
# gateway's names its service and loopback (agents and the AWS CLI reach it on the host);
# the schedulers' names both replicas.
tls="$here/.build/tls"
# .v2: agent certificates serve (the agents' log services are mTLS); older sets are made anew.
if [ ! -f "$tls/berth-ca.pem" ] || [ ! -f "$tls/.v2" ]; then
	rm -rf "$tls"
	mkdir -p "$tls"
	b="$here/.build/berth"
	"$b" tls ca create --dir "$tls"
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role scheduler --dns scheduler1 --dns scheduler2
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role gateway --dns gateway
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role agent
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role admin
	# The containers read the keys as whatever user they run as; the directory is the
	# operator's own, under deploy/.build.
	chmod 0644 "$tls"/*-key.pem
	rm "$tls/berth-ca-key.pem" # nothing in the stack signs; make a new CA to add roles
	touch "$tls/.v2"
fi

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

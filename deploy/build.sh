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

# The agent image's root (Dockerfile.agent): each agent is a host of its own, running its
# own containerd (`berth-agent --run-containerd`), runc, the CNI plugins and iptables in
# its own network namespace. These are this machine's Debian binaries (packages
# containerd, runc, containernetworking-plugins, iptables: `apt-get install` them) plus
# every shared library `ldd` names, copied at the same paths into .build/agent-root.
# The staging is rebuilt from scratch each time, so it holds exactly what the packages
# installed here hold.
root="$here/.build/agent-root"
rm -rf "$root"
mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib/cni" "$root/etc" "$root/tmp" "$root/run"
need() {
	[ -e "$1" ] || { echo "deploy/build.sh: $1 is missing: apt-get install $2" >&2; exit 1; }
}
libs() { # the shared libraries (and the dynamic loader) a binary loads, at their paths
	ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
}
stage() { # stage FILE: the file (symlinks followed) and its libraries at the same paths
	for f in "$1" $(libs "$1"); do
		mkdir -p "$root$(dirname "$f")"
		[ -e "$root$f" ] || cp -L "$f" "$root$f"
	done
}
xtables=$(ls -d /usr/lib/*-linux-gnu/xtables 2>/dev/null | head -n1)
need /usr/bin/containerd containerd
need /usr/bin/containerd-shim-runc-v2 containerd
need /usr/sbin/runc runc
need /usr/sbin/xtables-nft-multi iptables
need "$xtables" iptables
for p in bridge host-local portmap firewall loopback; do
	need "/usr/lib/cni/$p" containernetworking-plugins
	stage "/usr/lib/cni/$p"
done
for b in /usr/bin/containerd /usr/bin/containerd-shim-runc-v2 /usr/sbin/runc /usr/sbin/xtables-nft-multi; do
	stage "$b"
done
# iptables' extensions (dlopened by name: -j MASQUERADE, -m conntrack, ...).
for m in "$xtables"/*.so; do
	stage "$m"
done
# The nf_tables backend, as Debian's default `iptables` (the plugins and the agent run
# `iptables` from PATH).
for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -s xtables-nft-multi "$root/usr/sbin/$n"
done
cp /etc/protocols "$root/etc/protocols" 2>/dev/null || true
# The stack's TLS material (docs/security.md), made once and kept across builds: a private
# CA and one certificate per role, in deploy/.build/tls (mounted read-only at /tls). The
# gateways' names both gateway services and loopback (agents and the AWS CLI reach them on
# the host); the schedulers' names both replicas. etcd has a CA of its own, in
# deploy/.build/etcd-tls (mounted at /etcd-tls only where etcd is read): its members'
# certificate (peer and client TLS) and the one client certificate the roles that read
# etcd present (schedulers, dns, lb). No agent, gateway or user certificate opens etcd.
tls="$here/.build/tls"
# .v3: two gateways and etcd's own CA; older sets are made anew.
if [ ! -f "$tls/berth-ca.pem" ] || [ ! -f "$tls/.v3" ]; then
	rm -rf "$tls"
	mkdir -p "$tls"
	b="$here/.build/berth"
	"$b" tls ca create --dir "$tls"
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role scheduler --dns scheduler1 --dns scheduler2
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role gateway --dns gateway --dns gateway2
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role agent
	"$b" tls cert create --dir "$tls" --ca "$tls/berth-ca.pem" --key "$tls/berth-ca-key.pem" --role admin
	# The containers read the keys as whatever user they run as; the directory is the
	# operator's own, under deploy/.build.
	chmod 0644 "$tls"/*-key.pem
	rm "$tls/berth-ca-key.pem" # nothing in the stack signs; make a new CA to add roles
	e="$here/.build/etcd-tls"
	rm -rf "$e"
	mkdir -p "$e"
	"$b" tls ca create --dir "$e"
	# The members' certificate serves (and, between members, is a client too): a serving
	# role's certificate names 127.0.0.1, where the lb role reaches etcd1.
	"$b" tls cert create --dir "$e" --ca "$e/berth-ca.pem" --key "$e/berth-ca-key.pem" --role scheduler \
		--common-name etcd --dns etcd1 --dns etcd2 --dns etcd3
	mv "$e/berth-scheduler.pem" "$e/etcd-member.pem"
	mv "$e/berth-scheduler-key.pem" "$e/etcd-member-key.pem"
	"$b" tls cert create --dir "$e" --ca "$e/berth-ca.pem" --key "$e/berth-ca-key.pem" --role client --common-name etcd-client
	mv "$e/berth-client.pem" "$e/etcd-client.pem"
	mv "$e/berth-client-key.pem" "$e/etcd-client-key.pem"
	mv "$e/berth-ca.pem" "$e/etcd-ca.pem"
	rm "$e/berth-ca-key.pem"
	chmod 0644 "$e"/*-key.pem
	touch "$tls/.v3"
fi

# The schedulers' secrets keyring (docs/secrets.md): Secrets Manager, SSM SecureString and
# access keys sealed at rest. Made once and kept, like the TLS material: a new key would
# leave what the stack sealed unreadable.
keyring="$here/.build/secrets.key"
if [ ! -f "$keyring" ]; then
	printf 'compose1:%s\n' "$(head -c 32 /dev/urandom | base64)" > "$keyring"
	chmod 0644 "$keyring" # read by the scheduler containers' user; the directory is the operator's
fi

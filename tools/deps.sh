#!/usr/bin/env bash
# deps.sh run|test: what `make run` (run) or `make test` (test: run's and the tests' tools)
# needs from the machine. Missing pieces are installed with apt-get when running as root
# (one `apt-get update`, only when something is missing); otherwise, or with
# BERTH_NO_INSTALL=1, it prints one line per missing piece, naming the command that
# installs it and why it is needed, and fails. Nothing missing: no output, no apt call.
#
# It runs nothing but bash builtins and the programs it checks, so a test can arrange PATH
# to hide some. BERTH_CNI_PLUGIN_DIR (comma-separated, as `berth dev` reads it) names the
# CNI plugin directories; BERTH_DEPS_ROOT (tests only) stands for / in the fixed paths
# below (/usr/lib/cni, /opt/cni/bin, /usr/bin/aws, /usr/bin/python3, /usr/sbin, /sbin).
set -uo pipefail

what=${1:-test}
case $what in run | test) ;; *)
	echo "usage: $0 run|test" >&2
	exit 2
	;;
esac
root=${BERTH_DEPS_ROOT:-}
IFS=, read -r -a plugin_dirs <<<"${BERTH_CNI_PLUGIN_DIR:-$root/usr/lib/cni,$root/opt/cni/bin}"
# A user's PATH may lack the sbin directories where iptables and runc live.
search_path="$PATH:$root/usr/sbin:$root/sbin"

have() { PATH=$search_path command -v "$1" >/dev/null 2>&1; }

missing=() # "package<TAB>what<TAB>why", one per missing piece

need() { missing+=("$1	$2	$3"); }

warnings=() # lines printed whatever else happens; they fail nothing

check() {
	missing=()
	warnings=()
	# berth dev runs tasks' containers through containerd (the system one, else a private
	# one it starts) and its runc shim.
	have containerd || need containerd "containerd" "berth dev runs tasks' containers through it"
	have containerd-shim-runc-v2 || need containerd "containerd-shim-runc-v2" "containerd starts containers through it"
	have runc || need runc "runc" "containerd's shim runs containers with it"
	# Task networking (bridge, the default, awsvpc and none) runs the standard CNI plugins
	# the agent looks for (services/agent/network: PluginsFor); bridge's NAT, portmap and
	# firewall need iptables. The compose stack's agent image (deploy/build.sh) copies
	# Debian's: /usr/lib/cni, /usr/sbin/xtables-nft-multi, containerd and runc.
	local p d found
	for p in bridge host-local portmap firewall loopback; do
		found=
		for d in "${plugin_dirs[@]}"; do
			if [ -f "$d/$p" ] && [ -x "$d/$p" ]; then
				found=1
				break
			fi
		done
		[ -n "$found" ] || need containernetworking-plugins "CNI plugin $p (in ${plugin_dirs[*]})" "task networking (networkMode bridge, awsvpc, none) runs it"
	done
	have iptables || need iptables "iptables" "networkMode bridge and awsvpc set up NAT and port mappings with it"
	# initProcessEnabled mounts a static init: Docker's docker-init, else tini's tini-static.
	have docker-init || have tini-static || need tini "docker-init or tini-static" "initProcessEnabled runs it as the container's PID 1"
	[ "$what" = test ] || return 0

	have xtables-nft-multi || need iptables "xtables-nft-multi" "the compose stack's agent image (deploy/build.sh) copies it"
	# `aws logs tail` (the CloudWatch Logs CLI test) needs AWS CLI version 2: Debian's
	# awscli (/usr/bin/aws); an `aws` earlier on PATH (pyenv's v1) is fine beside it.
	if ! [ -x "$root/usr/bin/aws" ]; then
		local v
		v=$(aws --version 2>&1) || v=
		[[ $v == aws-cli/2* ]] || need awscli "AWS CLI version 2" "the e2e tests drive Berth with it (aws logs tail needs version 2)"
	fi
	# The README and the e2e tests point the CLI at Berth with AWS_ENDPOINT_URL, which the
	# AWS CLI honours from 2.13 (v2) and 1.29 (v1) on: an older one (Debian 12's awscli is
	# 2.9.19) sends every call to real AWS. No Debian package is newer: say so, don't fail.
	if have aws; then
		local av
		av=$(aws --version 2>&1) || av=
		if [[ $av =~ ^aws-cli/([0-9]+)\.([0-9]+) ]]; then
			local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
			if ((major < 1 || (major == 1 && minor < 29) || (major == 2 && minor < 13))); then
				warnings+=("make $what: ${av%% *} (the aws first on PATH) ignores AWS_ENDPOINT_URL, honoured from AWS CLI 2.13 and 1.29: the README's and the tests' calls would go to real AWS; put a newer aws first on PATH (python3 -m pip install --user 'awscli>=1.29'), or pass --endpoint-url")
			fi
		fi
	fi
	have jq || need jq "jq" "the deploy-tool e2e test's shell loop parses the CLI's JSON with it"
	# The README walkthrough reads the tasks' ports with curl.
	have curl || need curl "curl" "the README walkthrough's test reaches the tasks with it"
	# The console's browser test drives headless Chromium (chromedp).
	have chromium || need chromium "chromium" "the console's browser test drives it headless"
	# The deploy-tool e2e test drives boto3 as deploy tools do. Debian's boto3 lives in
	# Debian's python3; a python3 earlier on PATH (pyenv) may not see it: the test uses
	# whichever has it (tests/e2e boto3Python).
	if ! python3 -c 'import boto3' >/dev/null 2>&1 && ! "$root/usr/bin/python3" -c 'import boto3' >/dev/null 2>&1; then
		need python3-boto3 "python3 with boto3" "the deploy-tool e2e test drives Berth with boto3"
	fi
}

# report prints one line per missing piece; sudo is the prefix of the command.
report() {
	local m pkg piece why
	for m in "${missing[@]}"; do
		IFS=$'\t' read -r pkg piece why <<<"$m"
		echo "make $what: missing $piece: $why; install it with: ${1}apt-get install -y $pkg" >&2
	done
}

packages() {
	local m pkg seen=" "
	for m in "${missing[@]}"; do
		pkg=${m%%	*}
		case $seen in *" $pkg "*) ;; *)
			seen+="$pkg "
			echo "$pkg"
			;;
		esac
	done
}

check
for w in "${warnings[@]}"; do echo "$w" >&2; done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "${BERTH_NO_INSTALL:-}" = 1 ]; then
	report ""
	exit 1
fi
if [ "$EUID" -ne 0 ]; then
	report "sudo "
	exit 1
fi
if ! have apt-get; then
	report ""
	echo "make $what: no apt-get on this machine: install the equivalents with its package manager" >&2
	exit 1
fi
mapfile -t pkgs < <(packages)
echo "make $what: installing ${pkgs[*]} (apt-get; BERTH_NO_INSTALL=1 only reports)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q && apt-get install -y -q "${pkgs[@]}" || {
	echo "make $what: apt-get install ${pkgs[*]} failed" >&2
	exit 1
}
check
if [ ${#missing[@]} -gt 0 ]; then
	report ""
	echo "make $what: still missing after apt-get install" >&2
	exit 1
fi

#!/usr/bin/env bash
# Install everything the project needs on Debian bookworm, as root (or with sudo):
# system packages, the Python virtualenv at $VENV, and the kube and etcd binaries (built with the
# machine's Go from the Go module proxy, cached outside the repo).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# etcd-server/etcd-client: etcd 3.4.23 for version-upgrade tests; openssl: sandbox certificates;
# util-linux: unshare/nsenter for the sandbox's DNS namespace; iptables and iproute2 (ss): the
# sandbox's partition fault (packets dropped by the sender pod's cgroup, open connections reset).
missing=""
command -v openssl >/dev/null || missing="$missing openssl"
command -v unshare >/dev/null || missing="$missing util-linux"
command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || missing="$missing iptables"
command -v ss >/dev/null || [ -x /usr/bin/ss ] || missing="$missing iproute2"
[ -x /usr/bin/etcd ] || missing="$missing etcd-server"
[ -x /usr/bin/etcdctl ] || missing="$missing etcd-client"
if [ -n "$missing" ]; then
  echo "installing system packages:$missing" >&2
  as_root apt-get update -qq
  # etcd-server's post-install tries to start a service; there is none to start here.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 as_root apt-get install -y -qq $missing >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
stamp="$VENV/.installed-$(cat setup.cfg pyproject.toml | sha1sum | cut -c1-12)"
if [ ! -e "$stamp" ]; then
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e '.[test]'
  rm -f "$VENV"/.installed-* && touch "$stamp"
fi

# The Go builds (Kubernetes, etcd, helm + Prometheus) run at the same time: each is mostly module
# downloads and linking, so one's downloads overlap another's compiling. Each is skipped when cached.
outputs=$(mktemp -d)
trap 'rm -rf "$outputs"' EXIT
pids=""
for installer in kube etcd tool; do
  bash "scripts/install-$installer-binaries.sh" >"$outputs/$installer" &
  pids="$pids $!"
done
failed=0
for pid in $pids; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || { echo "a binary build failed (its output is above)" >&2; exit 1; }

# The operator runs the etcdctl beside its Python (etcd_common.etcd.etcdctl.default_binary): the newest build;
# the backup operator's trial restores run the etcd beside it (default_etcd_binary).
newest_etcd_dir=$(sort -V "$outputs/etcd" | tail -n 1 | cut -d' ' -f2)
for tool in etcd etcdctl etcdutl; do ln -sfn "$newest_etcd_dir/$tool" "$VENV/bin/$tool"; done
# helm, prometheus and promtool (chart, alert-rule and monitoring tests), built from Go modules;
# fake-gcs-server (Go module) and azurite-blob (npm), the ABS and GCS storage tests' emulators.
while read -r _tool _version dir; do
  for program in "$dir"/*; do ln -sfn "$program" "$VENV/bin/$(basename "$program")"; done
done < "$outputs/tool"

#!/usr/bin/env bash
# Provide etcd, etcdctl and etcdutl of every release pinned under scripts/etcd-build/v3.<minor>/go.mod
# (the newest 3.5.x and 3.6.x), each built with `go build` from the Go module proxy and cached per
# version outside the checkout. etcd 3.4 comes from Debian (etcd-server/etcd-client, installed by
# install-deps.sh) and serves only as an upgrade source.
# Prints one "<version> <directory>" line per release.
set -euo pipefail
cd "$(dirname "$0")/etcd-build"
CACHE_DIR="${ETCD_OPERATOR_PY_CACHE:-$HOME/.cache/etcd-operator-py}"
WANTED="etcd etcdctl etcdutl"

for module in v3.*/; do
  module=${module%/}
  version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$module/go.mod")
  [ -n "$version" ] || { echo "no go.etcd.io/etcd/server/v3 requirement in $module/go.mod" >&2; exit 1; }
  bin_dir="$CACHE_DIR/etcd-$version/bin"
  missing=0
  for b in $WANTED; do [ -x "$bin_dir/$b" ] || missing=1; done
  if [ "$missing" = 1 ]; then
    command -v go >/dev/null || { echo "go not found: etcd $version is built from Go modules" >&2; exit 1; }
    echo "building etcd $version from the Go module proxy with $(go version) (one time)" >&2
    start=$(date +%s)
    rm -rf "$bin_dir.tmp" && mkdir -p "$bin_dir.tmp"
    # The version etcd reports comes from its own source (version.Version), not from ldflags.
    (cd "$module" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
      -o "$bin_dir.tmp/" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdutl/v3 >&2)
    mv "$bin_dir.tmp/server" "$bin_dir.tmp/etcd"  # go names a main package after its module: server
    for b in $WANTED; do [ -x "$bin_dir.tmp/$b" ] || { echo "etcd build produced no $b" >&2; ls "$bin_dir.tmp" >&2; exit 1; }; done
    rm -rf "$bin_dir" && mv "$bin_dir.tmp" "$bin_dir"
    echo "built etcd $version in $(( $(date +%s) - start ))s" >&2
  fi
  echo "${version#v} $bin_dir"
done

#!/usr/bin/env bash
# Provide kube-apiserver, kube-controller-manager, kube-scheduler and kubectl for the sandbox.
# Order: $KUBEBUILDER_ASSETS (envtest convention) if it has all four, else a cached build of the
# Kubernetes release pinned in scripts/kube-build/go.mod, built with `go build` from the Go module
# proxy. The cache lives outside the checkout so fresh clones reuse it.
# Prints the directory holding the binaries on its last line.
set -euo pipefail
cd "$(dirname "$0")/kube-build"

KUBE_VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' go.mod)
[ -n "$KUBE_VERSION" ] || { echo "no k8s.io/kubernetes requirement in $(pwd)/go.mod" >&2; exit 1; }
CACHE_DIR="${ETCD_OPERATOR_PY_CACHE:-$HOME/.cache/etcd-operator-py}"
BIN_DIR="$CACHE_DIR/kube-$KUBE_VERSION/bin"
WANTED="kube-apiserver kube-controller-manager kube-scheduler kubectl"

have_all() {
  local dir=$1
  for b in $WANTED; do [ -x "$dir/$b" ] || return 1; done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if have_all "$KUBEBUILDER_ASSETS"; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of: $WANTED; building instead" >&2
fi

if have_all "$BIN_DIR"; then
  echo "$BIN_DIR"
  exit 0
fi

command -v go >/dev/null || { echo "go not found: the kube binaries are built from Go modules" >&2; exit 1; }
echo "building kube binaries $KUBE_VERSION from the Go module proxy with $(go version) (one time)" >&2
start=$(date +%s)
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
# What hack/lib/version.sh sets, so `kubectl version` and /version report the real release.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done
rm -rf "$BIN_DIR.tmp" && mkdir -p "$BIN_DIR.tmp"
GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR.tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl >&2
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
echo "built kube binaries $KUBE_VERSION in $(( $(date +%s) - start ))s" >&2
echo "$BIN_DIR"

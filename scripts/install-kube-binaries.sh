#!/usr/bin/env bash
# Provide kube-apiserver, kube-controller-manager and kubectl v1.20.2 for the sandbox.
# Order: $KUBEBUILDER_ASSETS (envtest convention) if set, else a cached build from Debian's
# `kubernetes` source package. The cache lives outside the checkout so fresh clones reuse it.
# Prints the directory holding the binaries on its last line.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.20.2}"
# Bump when the build recipe changes, so a cache made by an older recipe is never reused.
# r2: vendored reflect2 replaced by 1.0.2 (1.0.1 built with Go >= 1.18 segfaults on CR writes).
# r3: OpenAPI type validation no longer takes "" for null (see below).
BUILD_REVISION=r3
CACHE_DIR="${ETCD_OPERATOR_PY_CACHE:-$HOME/.cache/etcd-operator-py}"
BIN_DIR="$CACHE_DIR/kube-v$KUBE_VERSION-$BUILD_REVISION/bin"
WANTED="kube-apiserver kube-controller-manager kubectl"

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

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

echo "building kube binaries v$KUBE_VERSION from Debian's source package (one time, ~5 min)" >&2
start=$(date +%s)
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  as_root tee /etc/apt/sources.list.d/deb-src-bookworm.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  as_root apt-get update -qq
fi
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq golang-go rsync dpkg-dev \
  golang-github-modern-go-reflect2-dev >/dev/null

work="$CACHE_DIR/kube-src-$$"
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && apt-get source -qq "kubernetes=$(apt-cache showsrc kubernetes | awk '/^Version:/ {print $2; exit}')" >/dev/null 2>&1 || apt-get source -qq kubernetes >/dev/null)
src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n 1)
[ -n "$src" ] || { echo "apt-get source kubernetes produced no tree in $work" >&2; exit 1; }
grep -q "v$KUBE_VERSION\|$KUBE_VERSION" "$src/debian/changelog" || echo "warning: source tree may not be v$KUBE_VERSION" >&2
# The vendored github.com/modern-go/reflect2 v1.0.1 crashes (SIGSEGV in json-iterator) when built
# with Debian's Go 1.19: every custom-resource write kills the apiserver. v1.0.2 is the upstream fix
# and has the same API; Debian ships it as source.
reflect2_src=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$reflect2_src/reflect2.go" ] || { echo "missing $reflect2_src (golang-github-modern-go-reflect2-dev)" >&2; exit 1; }
rm -rf "$src/vendor/github.com/modern-go/reflect2"
mkdir -p "$src/vendor/github.com/modern-go/reflect2"
cp "$reflect2_src"/*.go "$reflect2_src"/*.s "$src/vendor/github.com/modern-go/reflect2/" 2>/dev/null || cp "$reflect2_src"/*.go "$src/vendor/github.com/modern-go/reflect2/"
rm -f "$src"/vendor/github.com/modern-go/reflect2/*_test.go
# The vendored OpenAPI validator treats a value as null when
# reflect.DeepEqual(reflect.Zero(T), reflect.ValueOf(data)); with Go >= 1.19 both sides share one
# zero buffer for "", so every empty string in a custom resource is refused as "must be of type
# string: null". With the Go it was written for, that test only ever matched nil: say so directly.
zero_check='reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))'
patched=0
for f in $(grep -rlF "$zero_check" "$src/vendor" --include=type.go); do
  sed -i "s/reflect\.DeepEqual(reflect\.Zero(reflect\.TypeOf(data)), reflect\.ValueOf(data))/reflect.ValueOf(data).Kind() == reflect.Invalid/" "$f"
  patched=$((patched + 1))
done
[ "$patched" -gt 0 ] || { echo "OpenAPI zero-value check not found in the vendored tree" >&2; exit 1; }
(
  cd "$src"
  export GOFLAGS=-mod=vendor GO111MODULE=on KUBE_GIT_VERSION="v$KUBE_VERSION" KUBE_GIT_TREE_STATE=clean
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kubectl" >&2
)
mkdir -p "$BIN_DIR.tmp"
for b in $WANTED; do
  cp "$(find "$src/_output" -type f -name "$b" -perm -u+x | head -n 1)" "$BIN_DIR.tmp/$b"
done
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
rm -rf "$work"
echo "built kube binaries in $(( $(date +%s) - start ))s" >&2
echo "$BIN_DIR"

#!/usr/bin/env bash
# Provide the tools the tests drive that Debian does not ship usable: helm (the chart tests),
# Prometheus + promtool (the alert-rule tests and the monitoring test; Debian's prometheus is built
# without Kubernetes service discovery), the cloud-storage emulators (the ABS and GCS storage
# tests): fake-gcs-server and Azurite, and cert-manager's controller (the TLS.certManager tests). The Go tools are built with `go build` from the Go module
# pinned in scripts/tool-build/<tool>/go.mod, Azurite installed from npm at the version pinned
# below; each is cached per version outside the checkout.
# Prints one "<tool> <version> <directory>" line per tool.
set -euo pipefail
cd "$(dirname "$0")/tool-build"
CACHE_DIR="${ETCD_OPERATOR_PY_CACHE:-$HOME/.cache/etcd-operator-py}"

# build_tool <tool> <module> <version ldflags, %s = the version> <main packages...>
build_tool() {
  local tool=$1 module=$2 ldflag=$3; shift 3
  local version bin_dir start
  version=$(awk -v m="$module" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$tool/go.mod")
  [ -n "$version" ] || { echo "no $module requirement in $tool/go.mod" >&2; exit 1; }
  bin_dir="$CACHE_DIR/$tool-$version/bin"
  local missing=0
  for pkg in "$@"; do [ -x "$bin_dir/$(basename "$pkg")" ] || missing=1; done
  if [ "$missing" = 1 ]; then
    command -v go >/dev/null || { echo "go not found: $tool $version is built from Go modules" >&2; exit 1; }
    echo "building $tool $version from the Go module proxy with $(go version) (one time)" >&2
    start=$(date +%s)
    rm -rf "$bin_dir.tmp" && mkdir -p "$bin_dir.tmp"
    # shellcheck disable=SC2059
    (cd "$tool" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build \
      -ldflags "-s -w $(printf -- "$ldflag" "$version")" -o "$bin_dir.tmp/" "$@" >&2)
    for pkg in "$@"; do
      [ -x "$bin_dir.tmp/$(basename "$pkg")" ] || { echo "$tool build produced no $(basename "$pkg")" >&2; exit 1; }
    done
    rm -rf "$bin_dir" && mv "$bin_dir.tmp" "$bin_dir"
    echo "built $tool $version in $(( $(date +%s) - start ))s" >&2
  fi
  echo "$tool $version $bin_dir"
}

build_tool helm helm.sh/helm/v4 "-X helm.sh/helm/v4/internal/version.version=%s" \
  helm.sh/helm/v4/cmd/helm
# Prometheus' Go module v0.3XY.Z is Prometheus 3.XY.Z; the version ldflag shows the module's.
build_tool prometheus github.com/prometheus/prometheus "-X github.com/prometheus/common/version.Version=%s" \
  github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
build_tool fake-gcs-server github.com/fsouza/fake-gcs-server "-X main.version=%s" \
  github.com/fsouza/fake-gcs-server
# cert-manager's controller (the TLS.certManager tests): its own controller module is not on the
# module proxy, so scripts/tool-build/cert-manager/ starts the same controllers from the root
# module's packages; its CRDs (plain YAML in the root module's deploy/crds) go beside bin/.
cert_manager=$(build_tool cert-manager github.com/cert-manager/cert-manager \
  "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=%s" \
  etcd-operator-py/cert-manager-build/cert-manager-controller)
crd_dir="$(dirname "$(echo "$cert_manager" | cut -d' ' -f3)")/crds"
if [ ! -s "$crd_dir/cert-manager.io_certificates.yaml" ]; then
  module_dir=$(cd cert-manager && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)
  rm -rf "$crd_dir.tmp" && mkdir -p "$crd_dir.tmp"
  cp "$module_dir"/deploy/crds/*.yaml "$crd_dir.tmp/" && chmod -R u+w "$crd_dir.tmp"
  rm -rf "$crd_dir" && mv "$crd_dir.tmp" "$crd_dir"
fi
echo "$cert_manager"

# npm_tool <tool> <package> <version> <programs...>: `npm install` into the cache, the programs
# linked into one bin directory (so only they end up beside the interpreter).
npm_tool() {
  local tool=$1 package=$2 version=$3; shift 3
  local dir="$CACHE_DIR/$tool-$version" start
  local missing=0
  for program in "$@"; do [ -x "$dir/bin/$program" ] || missing=1; done
  if [ "$missing" = 1 ]; then
    command -v npm >/dev/null || { echo "npm not found: $tool $version is installed from npm" >&2; exit 1; }
    echo "installing $tool $version from npm with node $(node --version) (one time)" >&2
    start=$(date +%s)
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin"
    npm install --prefix "$dir.tmp" --no-audit --no-fund --omit=dev --loglevel=error "$package@$version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    for program in "$@"; do
      [ -x "$dir/node_modules/.bin/$program" ] || { echo "$tool install produced no $program" >&2; exit 1; }
      ln -sfn "$dir/node_modules/.bin/$program" "$dir/bin/$program"
    done
    echo "installed $tool $version in $(( $(date +%s) - start ))s" >&2
  fi
  echo "$tool $version $dir/bin"
}

# Azurite's blob service alone: the ABS storage tests need nothing else.
npm_tool azurite azurite 3.37.0 azurite-blob

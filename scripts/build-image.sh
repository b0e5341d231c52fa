#!/usr/bin/env bash
# Build the operators' image from the Dockerfile with buildah (no daemon), tagged
# $IMAGE_REPOSITORY:$IMAGE_TAG (etcd-operator-py:<setup.cfg version>, what deploy/ and the chart name),
# in buildah's local storage (containers-storage). `make image`; also run by the image tests.
# Base images (IMAGE_BASES): `public` pulls the Dockerfile's defaults; `standin` builds local
# stand-ins for them, once, cached in buildah's storage: a Debian bookworm root filesystem made with
# mmdebstrap holding python3.11 and pip (for python:3.11-slim-bookworm) and an image holding the
# etcd, etcdctl and etcdutl built by scripts/install-etcd-binaries.sh (for the etcd image); `auto`
# (the default) takes the public ones where their registries' names resolve, else the stand-ins.
# Python packages come from PyPI during the build. Layers are cached (buildah --layers): a build of
# an unchanged checkout takes seconds. Prints the image's name on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE_DIR="${ETCD_OPERATOR_PY_CACHE:-$HOME/.cache/etcd-operator-py}"
VERSION=$(awk -F' *= *' '$1 == "version" {print $2; exit}' setup.cfg)
IMAGE_REPOSITORY="${IMAGE_REPOSITORY:-etcd-operator-py}"
IMAGE_TAG="${IMAGE_TAG:-$VERSION}"
IMAGE_BASES="${IMAGE_BASES:-auto}"
STANDIN_REPOSITORY="localhost/etcd-operator-py-standin"
# The recipe of the Python stand-in: a change to it builds a new one.
STANDIN_PACKAGES="python3,python3-pip,python3-venv,python-is-python3,passwd,ca-certificates"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
log() { echo "build-image: $*" >&2; }
# The default of a Dockerfile ARG: `ARG NAME=value`.
dockerfile_default() { awk -F= -v name="$1" '$1 == "ARG " name {print $2; exit}' Dockerfile; }
image_exists() { $BUILDAH inspect --type image "$1" >/dev/null 2>&1; }
# The registry of an image reference (Docker Hub for `python:...`) has a name that resolves. Only a
# name lookup: nothing connects to a registry that does not resolve.
registry_resolves() {
  local host=registry-1.docker.io first=${1%%/*}
  if [ "$first" != "$1" ]; then case $first in *.*|*:*|localhost) host=$first ;; esac; fi
  timeout 10 getent ahosts "$host" >/dev/null 2>&1
}

missing=""
for tool in buildah mmdebstrap runc; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
if [ -n "$missing" ]; then
  log "installing$missing from Debian"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
BUILDAH="buildah"
[ "$(id -u)" = 0 ] || BUILDAH="sudo buildah"  # root storage: the tests run the image with runc as root

ETCD_IMAGE_DEFAULT=$(dockerfile_default ETCD_IMAGE)
PYTHON_IMAGE_DEFAULT=$(dockerfile_default PYTHON_IMAGE)
ETCD_VERSION=${ETCD_IMAGE_DEFAULT##*:}  # v3.6.16

python_standin() {
  local recipe name ctr mnt
  recipe=$(echo "bookworm minbase merged-usr stand-in-for-label $STANDIN_PACKAGES" | sha1sum | cut -c1-12)
  name="$STANDIN_REPOSITORY/python:3.11-slim-bookworm-$recipe"
  if ! image_exists "$name"; then
    log "building the python:3.11-slim-bookworm stand-in with mmdebstrap (one time)"
    local start=$SECONDS
    mkdir -p "$CACHE_DIR"
    ctr=$($BUILDAH from scratch)
    mnt=$($BUILDAH mount "$ctr")
    # Debian's packages, no documentation, no apt lists; pip may install into the system Python as
    # in the official image (no EXTERNALLY-MANAGED marker).
    # merged-usr hook: /usr merged by mmdebstrap itself, not by the usrmerge package (and its Perl).
    as_root mmdebstrap --quiet --variant=minbase --include="$STANDIN_PACKAGES" \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
      bookworm "$mnt" "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main" >"$CACHE_DIR/python-standin.log" 2>&1 \
      || { tail -n 40 "$CACHE_DIR/python-standin.log" >&2; $BUILDAH rm "$ctr" >/dev/null; exit 1; }
    $BUILDAH umount "$ctr" >/dev/null
    $BUILDAH config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env LANG=C.UTF-8 --cmd python3 --label org.etcd-operator-py.stand-in-for="$PYTHON_IMAGE_DEFAULT" "$ctr"
    $BUILDAH commit --quiet --rm "$ctr" "$name" >/dev/null
    log "built $name in $(( SECONDS - start ))s"
  fi
  echo "$name"
}

etcd_standin() {
  local name="$STANDIN_REPOSITORY/etcd:$ETCD_VERSION" bin_dir="$CACHE_DIR/etcd-$ETCD_VERSION/bin" ctr
  if ! image_exists "$name"; then
    [ -x "$bin_dir/etcdctl" ] || bash scripts/install-etcd-binaries.sh >/dev/null
    [ -x "$bin_dir/etcdctl" ] || { log "no etcd $ETCD_VERSION in $bin_dir: is it pinned under scripts/etcd-build/?"; exit 1; }
    log "building the $ETCD_IMAGE_DEFAULT stand-in from $bin_dir"
    ctr=$($BUILDAH from scratch)
    $BUILDAH copy --quiet --chmod 0755 "$ctr" "$bin_dir/etcd" "$bin_dir/etcdctl" "$bin_dir/etcdutl" /usr/local/bin/ >/dev/null
    $BUILDAH config --entrypoint '["/usr/local/bin/etcd"]' \
      --label org.etcd-operator-py.stand-in-for="$ETCD_IMAGE_DEFAULT" "$ctr"
    $BUILDAH commit --quiet --rm "$ctr" "$name" >/dev/null
  fi
  echo "$name"
}

if [ "$IMAGE_BASES" = auto ]; then
  IMAGE_BASES=public
  for base in "$PYTHON_IMAGE_DEFAULT" "$ETCD_IMAGE_DEFAULT"; do
    image_exists "$base" || registry_resolves "$base" || IMAGE_BASES=standin
  done
  [ "$IMAGE_BASES" = public ] || log "the public base images' registries cannot be reached: building on local stand-ins"
fi
case $IMAGE_BASES in
  public) python_image=$PYTHON_IMAGE_DEFAULT etcd_image=$ETCD_IMAGE_DEFAULT pull=false ;;
  standin)  # one assignment each: a failing stand-in build stops the script (set -e)
    python_image=$(python_standin)
    etcd_image=$(etcd_standin)
    pull=never ;;
  *) log "IMAGE_BASES must be auto, public or standin, not $IMAGE_BASES"; exit 2 ;;
esac

# The build's downloads (PyPI) trust what this machine trusts (a proxy's CA, say); the bundle is
# mounted for the RUN step only, not copied into the image.
ca_volume=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  ca_volume=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
fi
image="$IMAGE_REPOSITORY:$IMAGE_TAG"
previous=$($BUILDAH images --quiet --no-trunc "$image" 2>/dev/null || true)
start=$SECONDS
$BUILDAH build --quiet --layers --force-rm --network host --pull="$pull" "${ca_volume[@]}" \
  --build-arg "PYTHON_IMAGE=$python_image" --build-arg "ETCD_IMAGE=$etcd_image" \
  --tag "$image" --file Dockerfile . >&2
# A new build leaves the previous one's layers dangling (a few hundred MB per change of the packages):
# remove dangling images (IMAGE_PRUNE=0 keeps them). The cache of this build is kept.
if [ -n "$previous" ] && [ "$previous" != "$($BUILDAH images --quiet --no-trunc "$image")" ] && [ "${IMAGE_PRUNE:-1}" != 0 ]; then
  $BUILDAH rmi --prune >/dev/null || log "could not prune dangling images"
fi
# Every name of the image is listed (a second tag, a relocated copy): the first line, read to the
# end (head would end the pipe early and pipefail report buildah's SIGPIPE).
size=$($BUILDAH images --format '{{.Size}}' "$image" | sed -n 1p)
log "built $image on $python_image and $etcd_image in $(( SECONDS - start ))s ($size)"
echo "$image"

#!/usr/bin/env bash
# Push the image `make image` built (scripts/build-image.sh) to $REGISTRY with buildah:
#   make image-push REGISTRY=registry.example.com/team
# pushes etcd-operator-py:<version> as registry.example.com/team/etcd-operator-py:<version>.
# Log in first (`buildah login registry.example.com`) or point REGISTRY_AUTH_FILE at an auth file.
# IMAGE_REPOSITORY and IMAGE_TAG name the local image, as for the build; IMAGE_PUSH_FLAGS are added to
# `buildah push` (e.g. `--creds user:password`, or `--tls-verify=false` for a registry without TLS).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=$(awk -F' *= *' '$1 == "version" {print $2; exit}' setup.cfg)
IMAGE_REPOSITORY="${IMAGE_REPOSITORY:-etcd-operator-py}"
IMAGE_TAG="${IMAGE_TAG:-$VERSION}"
: "${REGISTRY:?set REGISTRY to the registry (and path) to push to, e.g. REGISTRY=registry.example.com/team}"
BUILDAH="buildah"
[ "$(id -u)" = 0 ] || BUILDAH="sudo buildah"

local_image="$IMAGE_REPOSITORY:$IMAGE_TAG"
target="${REGISTRY%/}/${IMAGE_REPOSITORY##*/}:$IMAGE_TAG"
$BUILDAH inspect --type image "$local_image" >/dev/null || { echo "no image $local_image: run \`make image\` first" >&2; exit 1; }
# shellcheck disable=SC2086
$BUILDAH push --quiet ${IMAGE_PUSH_FLAGS:-} "$local_image" "docker://$target"
echo "pushed $local_image as $target: install with --set image.repository=${target%:*} --set image.tag=$IMAGE_TAG" >&2

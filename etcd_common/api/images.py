"""Which image repositories an operator may start containers from: a spec names images
(`spec.repository`, `spec.restore.fetchImage`) and whoever may write one must not make an operator
run just any image. Pure."""
from __future__ import annotations

from typing import Final

from etcd_common.api.restore_source import DEFAULT_FETCH_IMAGE

# The repository of this project's own image (the default fetch image): the operators already run it.
OPERATOR_IMAGE_REPOSITORY: Final = DEFAULT_FETCH_IMAGE.rsplit(":", 1)[0]
# The repositories the official etcd images are published to (`<repository>:v<version>`), and ours.
DEFAULT_TRUSTED_REPOSITORIES: Final = ("quay.io/coreos/etcd", "gcr.io/etcd-development/etcd",
                                       OPERATOR_IMAGE_REPOSITORY)
TRUSTED_REPOSITORIES_FLAG: Final = "--trusted-repositories / TRUSTED_REPOSITORIES"
# The image the operator itself runs from (the deploy manifests and the chart set it to the image
# they deploy, relocated or not): its repository is trusted besides the trusted repositories.
OPERATOR_IMAGE_FLAG: Final = "--operator-image"
OPERATOR_IMAGE_ENV: Final = "OPERATOR_IMAGE"
OPERATOR_IMAGE_HELP: Final = (
    "the image this operator runs from (the deploy manifests and the chart set it to the image they deploy): "
    "its repository is trusted besides --trusted-repositories, so the fetch image, this same image, runs "
    "wherever the image was moved to; empty: only --trusted-repositories [OPERATOR_IMAGE]")


def image_repository(image: str) -> str:
    """`registry:5000/team/tool` of `registry:5000/team/tool:1.0@sha256:...` (tag and digest off)."""
    name = image.strip().split("@", 1)[0]
    head, _, last = name.rpartition("/")
    last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


# Images built on a node and kept in its own storage (podman, buildah, CRI-O) are named
# `localhost/<name>`; such an image of a trusted `<name>` is trusted too (only whoever administers
# the node can put it there). Not the other way round: a bare `<name>` may be pulled from a registry.
LOCAL_STORAGE_PREFIX: Final = "localhost/"


def repository_trusted(repository: str, trusted: tuple[str, ...]) -> bool:
    """`repository` is an entry of `trusted`, or under an entry ending in "/", or is
    `localhost/<entry>` (the node's own storage, see LOCAL_STORAGE_PREFIX)."""
    local_name = repository.removeprefix(LOCAL_STORAGE_PREFIX) if repository.startswith(LOCAL_STORAGE_PREFIX) else None
    return any(repository == entry or (entry.endswith("/") and repository.startswith(entry)) or local_name == entry
               for entry in trusted)


def untrusted_image_problem(field: str, image: str, trusted: tuple[str, ...]) -> str | None:
    """Why `image` (the value of `field`) may not run, or None when its repository is trusted."""
    if repository_trusted(image_repository(image), trusted):
        return None
    return (f"{field} {image} is not from a repository this operator trusts "
            f"(trusted: {', '.join(trusted) or 'none'}; an administrator sets them with {TRUSTED_REPOSITORIES_FLAG})")


def parse_trusted_repositories(text: str, operator_image: str = "") -> tuple[str, ...]:
    """The comma-separated flag value as a tuple (blanks dropped), and the repository of the image
    the operator runs from (`operator_image`, "" = none) when it is not trusted already."""
    trusted = tuple(entry.strip() for entry in text.split(",") if entry.strip())
    if not operator_image.strip():
        return trusted
    own = image_repository(operator_image)
    return trusted if repository_trusted(own, trusted) else (*trusted, own)

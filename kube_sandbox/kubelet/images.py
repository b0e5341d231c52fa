"""Which local programs stand in for a container image (or, for an image built here, `runc.py`).

An image resolves to an `ImageRuntime`: directories put first on PATH and a table of absolute
in-image paths (e.g. `/usr/local/bin/etcd`) rewritten to host paths wherever they appear in the
command, args or env. Images we cannot stand in for raise `ImageNotAvailable`, which the pod
worker reports as `ErrImagePull`, like a real kubelet failing to pull. Images of buildah's local
storage (`localhost/<repository>:<tag>`) are the exception: they resolve to their own image config
and run in a real container (`runc.py`).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kube_sandbox.kubelet.runc import LocalImage, LocalImageError, LocalImages, is_local_image

log = logging.getLogger(__name__)

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ETCD_PROGRAMS = ("etcd", "etcdctl", "etcdutl")
# Where etcd images keep their programs; all resolve to the chosen version's binaries.
ETCD_IMAGE_BIN_DIRS = ("/usr/local/bin", "/usr/bin", "/bin")
OPERATOR_REPOSITORY = "etcd-operator-py"
OPERATOR_ENTRYPOINT = ("etcd-operator",)
# The image's other programs (setup.cfg console scripts), run with `command:`; like the entry point they
# resolve in the virtualenv's bin directory (on PATH, and /usr/local/bin rewritten to it).
OPERATOR_PROGRAMS = (*OPERATOR_ENTRYPOINT, "etcd-backup-operator", "etcd-backup")
GENERIC_REPOSITORIES = ("busybox", "debian", "python", "alpine", "ubuntu")
POD_IP_ENV = "SANDBOX_POD_IP"
# etcdctl's default endpoint, 127.0.0.1:2379, means "this pod's etcd"; here that is the pod IP.
# (ETCDCTL_ENDPOINTS cannot do this: etcdctl refuses to run when both it and --endpoints are set.)
ETCDCTL_WRAPPER = """#!/bin/sh
case " $* " in *" --endpoints"*) exec {etcdctl} "$@";; esac
if [ -n "$SANDBOX_POD_IP" ] && [ -z "$ETCDCTL_ENDPOINTS" ]; then
  exec {etcdctl} --endpoints="$SANDBOX_POD_IP:2379" "$@"
fi
exec {etcdctl} "$@"
"""
# busybox's `nslookup` applet, which the host lacks: the CoreOS operator's `check-dns` init container
# waits with it for a member's DNS name. Answers from the sandbox's hosts file (as DNS does here);
# exit status 1 for a name that does not resolve, as busybox's does.
BUSYBOX_NSLOOKUP = """#!/bin/sh
[ -n "$1" ] || { echo "usage: nslookup HOST" >&2; exit 1; }
address=$(getent hosts "$1" | awk '{print $1; exit}')
[ -n "$address" ] || { echo "nslookup: can't resolve '$1'" >&2; exit 1; }
printf 'Name:\t%s\nAddress: %s\n' "$1" "$address"
"""
_VERSION_TAG = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+)(?:-[0-9A-Za-z.]+)?$")


class ImageNotAvailable(Exception):
    """The image has no local stand-in; the message says why and what is available."""


@dataclass(frozen=True)
class ImageReference:
    repository: str  # e.g. "quay.io/coreos/etcd"
    tag: str  # "" when the reference has none

    @property
    def name(self) -> str:
        """Last path component of the repository: `etcd` for `quay.io/coreos/etcd`."""
        return self.repository.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ImageRuntime:
    image: str
    image_id: str  # goes into containerStatuses[].imageID
    path_dirs: tuple[Path, ...]  # prepended to BASE_PATH
    rewrites: tuple[tuple[str, str], ...]  # (absolute path in the image, host path)
    entrypoint: tuple[str, ...]  # the image's ENTRYPOINT: replaced by `command`
    cmd: tuple[str, ...]  # the image's CMD: replaced by `args` (or dropped when `command` is set)
    links: tuple[tuple[Path, Path], ...] = ()  # symlinks (link, target) that path_dirs rely on
    env: tuple[tuple[str, str], ...] = ()  # variables the image sets (ENV), before the container's own
    scripts: tuple[tuple[Path, str], ...] = ()  # executable files (path, content) in path_dirs
    # Programs (copy, original) hard-linked (copied across filesystems) where any user may run them:
    # the originals may be under a directory only root enters (~/.cache), and a pod may run as another.
    copies: tuple[tuple[Path, Path], ...] = ()
    local: LocalImage | None = None  # an image of the local store: runs in runc (runc.py), not as a process

    @property
    def path(self) -> str:
        return os.pathsep.join([*(str(d) for d in self.path_dirs), BASE_PATH])


def parse_image_reference(image: str) -> ImageReference:
    """Split `registry/repo:tag@digest` into repository and tag (a registry port is not a tag)."""
    reference = image.strip().split("@", 1)[0]
    last_slash = reference.rfind("/")
    colon = reference.rfind(":")
    if colon > last_slash:
        return ImageReference(reference[:colon], reference[colon + 1:])
    return ImageReference(reference, "")


def parse_etcd_version(tag: str) -> str | None:
    """`v3.5.1`, `3.5.1` and `3.5.1-0` (registry.k8s.io style) -> `3.5.1`."""
    match = _VERSION_TAG.match(tag)
    return match.group("version") if match else None


def container_argv(runtime: ImageRuntime, command: list[str], args: list[str]) -> list[str]:
    """Kubernetes semantics: `command` replaces ENTRYPOINT, `args` replaces CMD."""
    if command:
        return [*command, *args]
    if args:
        return [*runtime.entrypoint, *args]
    return [*runtime.entrypoint, *runtime.cmd]


class ImageCatalog:
    """Maps image names to local programs; pure apart from `materialize`, which makes symlinks."""

    def __init__(self, etcd_binaries: Mapping[str, Path], venv_bin_dir: Path, images_dir: Path,
                 source_dir: Path | None = None, local_images: LocalImages | None = None) -> None:
        self.etcd_binaries = dict(etcd_binaries)
        self.local_images = local_images
        self.venv_bin_dir = venv_bin_dir
        self.images_dir = images_dir
        self.source_dir = source_dir

    def resolve(self, image: str) -> ImageRuntime:
        reference = parse_image_reference(image)
        if is_local_image(image):
            return self._local(image)
        if reference.name == "etcd":
            return self._etcd(image, reference)
        if reference.name == OPERATOR_REPOSITORY:
            venv = str(self.venv_bin_dir)
            # The image has the default version's etcd beside etcdctl/etcdutl (trial restores run
            # it); here the newest build's directory, after the venv and before the host's PATH.
            newest = (self.etcd_binaries[max(self.etcd_binaries, key=_version_key)],) if self.etcd_binaries else ()
            # The checkout's packages first on the import path: the venv's install of the package
            # may be another checkout's (an editable install shared between git worktrees).
            source = (("PYTHONPATH", str(self.source_dir)),) if self.source_dir is not None else ()
            return ImageRuntime(
                image=image, image_id=f"sandbox://{OPERATOR_REPOSITORY}@{venv}",
                path_dirs=(self.venv_bin_dir, *newest), rewrites=(("/usr/local/bin", venv),),
                entrypoint=OPERATOR_ENTRYPOINT, cmd=(), env=source,
            )
        if reference.name in GENERIC_REPOSITORIES:
            if reference.name == "python":
                python = str(self.venv_bin_dir / "python")
                return ImageRuntime(
                    image=image, image_id=f"sandbox://python@{python}", path_dirs=(self.venv_bin_dir,),
                    rewrites=(("/usr/local/bin/python3", python), ("/usr/local/bin/python", python)),
                    entrypoint=(), cmd=("python3",),
                )
            if reference.name == "busybox":
                bin_dir = self.images_dir / "busybox" / "bin"
                return ImageRuntime(image=image, image_id="sandbox://busybox@host", path_dirs=(bin_dir,),
                                    rewrites=(), entrypoint=(), cmd=("sh",),
                                    scripts=((bin_dir / "nslookup", BUSYBOX_NSLOOKUP),))
            return ImageRuntime(image=image, image_id=f"sandbox://{reference.name}@host",
                                path_dirs=(), rewrites=(), entrypoint=(), cmd=("sh",))
        raise ImageNotAvailable(
            f'image "{image}" is not available in the sandbox: only etcd images '
            f"(versions {', '.join(sorted(self.etcd_binaries)) or 'none'}), "
            f"*/{OPERATOR_REPOSITORY} and {', '.join(GENERIC_REPOSITORIES)} can run here"
        )

    def _local(self, image: str) -> ImageRuntime:
        """An image of buildah's local storage (`localhost/...`), run by runc from its own files."""
        if self.local_images is None:
            raise ImageNotAvailable(f'image "{image}": this kubelet runs no local images (no runc, or not root)')
        try:
            found = self.local_images.find(image)
        except LocalImageError as e:
            raise ImageNotAvailable(f'image "{image}" is not in the local image store (`make image` builds '
                                    f"localhost/etcd-operator-py:<version>): {e}") from e
        config = found.config
        return ImageRuntime(
            image=image, image_id=f"{parse_image_reference(image).repository}@sha256:{found.image_id}", path_dirs=(), rewrites=(),
            entrypoint=tuple(config.get("Entrypoint") or ()), cmd=tuple(config.get("Cmd") or ()), env=found.env,
            local=found,
        )

    def _etcd(self, image: str, reference: ImageReference) -> ImageRuntime:
        if reference.tag in ("", "latest") and self.etcd_binaries:
            version: str | None = max(self.etcd_binaries, key=_version_key)
        else:
            version = parse_etcd_version(reference.tag)
        if version is None or version not in self.etcd_binaries:
            raise ImageNotAvailable(
                f'image "{image}": etcd version {reference.tag or "(none)"} is not available in the '
                f"sandbox (available: {', '.join(sorted(self.etcd_binaries)) or 'none'})"
            )
        source = self.etcd_binaries[version]
        bin_dir = self.images_dir / f"etcd-{version}" / "bin"
        programs_dir = self.images_dir / f"etcd-{version}" / "programs"
        programs = [p for p in ETCD_PROGRAMS if (source / p).exists()]
        copies = tuple((programs_dir / p, source / p) for p in programs)
        links = tuple((bin_dir / p, programs_dir / p) for p in programs if p != "etcdctl")
        scripts = tuple((bin_dir / p, ETCDCTL_WRAPPER.format(etcdctl=programs_dir / p))
                        for p in programs if p == "etcdctl")
        rewrites = tuple((f"{d}/{p}", str(bin_dir / p)) for d in ETCD_IMAGE_BIN_DIRS for p in programs)
        return ImageRuntime(
            image=image, image_id=f"sandbox://etcd@{source}", path_dirs=(bin_dir,),
            rewrites=rewrites, entrypoint=(), cmd=("/usr/local/bin/etcd",), links=links, scripts=scripts,
            copies=copies,
        )

    @staticmethod
    def materialize(runtime: ImageRuntime) -> None:
        """Create the copies, symlinks and scripts the runtime's PATH dirs rely on (idempotent)."""
        for copy, original in runtime.copies:
            _link_or_copy(original, copy)
        for path, content in runtime.scripts:
            if path.is_file() and not path.is_symlink() and path.read_text() == content:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
            tmp.write_text(content)
            tmp.chmod(0o755)
            tmp.replace(path)
        for link, target in runtime.links:
            if link.is_symlink() and os.readlink(link) == str(target):
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(f".{link.name}.{threading.get_ident()}.tmp")
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()
            tmp.symlink_to(target)
            tmp.replace(link)


def _link_or_copy(original: Path, copy: Path) -> None:
    """`copy` is `original` (a hard link, or a copy across filesystems), readable and runnable by
    every user; made again when the original changed."""
    source = original.stat()
    try:
        present = copy.stat()
    except FileNotFoundError:
        present = None
    if present is not None and (present.st_ino == source.st_ino and present.st_dev == source.st_dev
                                or (present.st_size, present.st_mtime_ns) == (source.st_size, source.st_mtime_ns)):
        return
    copy.parent.mkdir(parents=True, exist_ok=True)
    tmp = copy.with_name(f".{copy.name}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(original, tmp)
    except OSError:  # another filesystem
        shutil.copy2(original, tmp)
    os.chmod(tmp, source.st_mode | 0o555)
    tmp.replace(copy)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))

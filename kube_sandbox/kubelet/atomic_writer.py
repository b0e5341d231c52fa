"""The real kubelet's AtomicWriter layout for secret, configMap, downwardAPI and projected volumes, so
that a program reading a volume while it is updated never sees a half-written set of files.

    <volume>/<key>      -> ..data/<key>          (one symlink per top-level entry)
    <volume>/..data     -> ..2026_01_02_03_04_05.123456789   (the current set)
    <volume>/..2026_01_02_03_04_05.123456789/<key>           (the files, with their modes)

An update writes the new set into a new timestamped directory, points a temporary symlink
`..data_tmp` at it and renames that over `..data` (one atomic rename: readers see the old set or the
new one), adds the top-level symlinks of new entries, removes those of entries gone. Nothing is
written when the files on disk are already the wanted ones.

The real kubelet removes the old directory right after the swap; a reader that resolved `..data`
just before the swap then finds its file gone (ENOENT, a window of microseconds that a test reading
in a tight loop hits). Here old directories are removed by a later call (each refresh check makes
one) once the set that replaced them is OLD_SET_KEEP_SECONDS old.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path, PurePosixPath

from kube_sandbox.kubelet.environment import ContainerConfigError

DATA_DIR_NAME = "..data"
DATA_DIR_TMP_NAME = "..data_tmp"
TIMESTAMP_DIR_MODE = 0o755
OLD_SET_KEEP_SECONDS = 1.0  # how long a replaced set stays for readers that were in the middle of a path lookup

Files = dict[str, tuple[bytes, int]]  # relative path -> (content, mode)


def validate_path(relative: str) -> tuple[str, ...]:
    """The components of a volume item path; refuses paths that leave the volume or collide with
    the layout's own `..` entries (as the real kubelet does)."""
    path = PurePosixPath(relative)
    parts = path.parts
    if not parts or path.is_absolute() or ".." in parts or parts[0].startswith(".."):
        raise ContainerConfigError(f"invalid volume item path {relative!r}")
    return parts


def current_files(directory: Path) -> Files | None:
    """The files `..data` points at now (None: no atomic layout there yet)."""
    data = directory / DATA_DIR_NAME
    if not data.is_symlink() or not data.is_dir():
        return None
    files: Files = {}
    for root, _, names in os.walk(data, followlinks=False):
        for name in names:
            path = Path(root) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            files[path.relative_to(data).as_posix()] = (path.read_bytes(), mode)
    return files


def write_atomically(directory: Path, files: Files, keep_old_seconds: float = OLD_SET_KEEP_SECONDS) -> bool:
    """Make `directory` hold exactly `files` in the atomic layout; False when it already did
    (nothing written). Sets replaced more than `keep_old_seconds` ago are removed."""
    wanted = {relative: validate_path(relative) for relative in files}
    directory.mkdir(parents=True, exist_ok=True)
    if current_files(directory) == files:
        remove_old_sets(directory, keep_old_seconds)
        return False
    data = directory / DATA_DIR_NAME
    new_dir = Path(tempfile.mkdtemp(prefix=time.strftime("..%Y_%m_%d_%H_%M_%S."), dir=directory))
    os.chmod(new_dir, TIMESTAMP_DIR_MODE)
    for relative, (content, mode) in files.items():
        target = new_dir.joinpath(*wanted[relative])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        os.chmod(target, mode)
    _replace_with_symlink(directory / DATA_DIR_TMP_NAME, data, new_dir.name)
    top_level = {parts[0] for parts in wanted.values()}
    for name in sorted(top_level):
        link = directory / name
        points_to = f"{DATA_DIR_NAME}/{name}"
        if link.is_symlink() and os.readlink(link) == points_to:
            continue
        _replace_with_symlink(directory / f"..{name}.tmp", link, points_to)
    for entry in directory.iterdir():
        if entry.name.startswith("..") or entry.name in top_level:
            continue
        _remove(entry)  # an entry of the previous set that is gone now
    remove_old_sets(directory, keep_old_seconds)
    return True


def remove_old_sets(directory: Path, keep_old_seconds: float) -> None:
    """Remove the timestamped directories `..data` does not point at, once the one it points at
    (which replaced them all) is `keep_old_seconds` old."""
    data = directory / DATA_DIR_NAME
    if not data.is_symlink():
        return
    current = os.readlink(data)
    try:
        age = time.time() - (directory / current).stat().st_mtime
    except FileNotFoundError:
        return
    if age < keep_old_seconds:
        return
    for entry in directory.iterdir():
        if entry.name.startswith("..") and entry.name not in (DATA_DIR_NAME, current) \
                and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _replace_with_symlink(temporary: Path, path: Path, target: str) -> None:
    """`path` becomes a symlink to `target` in one rename (whatever it was before)."""
    temporary.unlink(missing_ok=True)
    os.symlink(target, temporary)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # a plain directory written before the atomic layout
    os.replace(temporary, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)

"""The atomic layout of secret/configMap/downwardAPI/projected volumes (the real kubelet's
AtomicWriter): symlinks into a timestamped directory swapped in one rename, modes kept, nothing
written when nothing changed."""
from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube_sandbox.kubelet.atomic_writer import DATA_DIR_NAME, current_files, write_atomically


def _data_target(directory: Path) -> str:
    return os.readlink(directory / DATA_DIR_NAME)


def _timestamped(directory: Path) -> list[str]:
    return sorted(e.name for e in directory.iterdir()
                  if e.name.startswith("..") and e.name != DATA_DIR_NAME and e.is_dir() and not e.is_symlink())


def test_keys_are_symlinks_into_a_timestamped_directory(tmp_path: Path) -> None:
    assert write_atomically(tmp_path, {"tls.crt": (b"cert", 0o644), "conf/etcd.yaml": (b"yaml", 0o600)})
    assert os.readlink(tmp_path / "tls.crt") == "..data/tls.crt"
    assert os.readlink(tmp_path / "conf") == "..data/conf"
    target = _data_target(tmp_path)
    assert target.startswith("..") and "/" not in target, target
    assert (tmp_path / DATA_DIR_NAME).is_symlink()
    assert _timestamped(tmp_path) == [target]
    assert (tmp_path / "tls.crt").read_bytes() == b"cert"
    assert (tmp_path / "conf/etcd.yaml").read_bytes() == b"yaml"
    assert sorted(e.name for e in tmp_path.iterdir()) == sorted(["tls.crt", "conf", DATA_DIR_NAME, target])


def test_unchanged_files_write_nothing(tmp_path: Path) -> None:
    files = {"a": (b"1", 0o644), "b": (b"2", 0o400)}
    write_atomically(tmp_path, files)
    target, inode = _data_target(tmp_path), (tmp_path / "a").stat().st_ino
    assert not write_atomically(tmp_path, dict(files))
    assert _data_target(tmp_path) == target and (tmp_path / "a").stat().st_ino == inode
    assert _timestamped(tmp_path) == [target]


def test_an_update_swaps_the_whole_set_and_removes_the_old_one_a_moment_later(tmp_path: Path) -> None:
    files = {"a": (b"new", 0o644), "c": (b"added", 0o644)}
    write_atomically(tmp_path, {"a": (b"old", 0o644), "b": (b"gone soon", 0o644)})
    old = _data_target(tmp_path)
    assert write_atomically(tmp_path, files)
    new = _data_target(tmp_path)
    assert new != old
    assert (tmp_path / "a").read_bytes() == b"new" and (tmp_path / "c").read_bytes() == b"added"
    assert not os.path.lexists(tmp_path / "b"), "a key gone from the source left its symlink behind"
    assert current_files(tmp_path) == files
    # Kept for readers in the middle of a lookup, then removed by a later check (a refresh's).
    assert _timestamped(tmp_path) == sorted([old, new])
    assert not write_atomically(tmp_path, files, keep_old_seconds=0.0)
    assert _timestamped(tmp_path) == [new], "the old set was not removed"


def test_modes_are_kept_and_a_mode_change_alone_is_written(tmp_path: Path) -> None:
    write_atomically(tmp_path, {"key": (b"k", 0o400), "cert": (b"c", 0o644)})
    write_atomically(tmp_path, {"key": (b"k2", 0o400), "cert": (b"c", 0o644)})
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o400
    assert stat.S_IMODE((tmp_path / "cert").stat().st_mode) == 0o644
    assert write_atomically(tmp_path, {"key": (b"k2", 0o440), "cert": (b"c", 0o644)})
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o440


def test_plain_files_of_an_earlier_kubelet_give_way_to_the_layout(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"plain")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "x").write_bytes(b"plain")
    (tmp_path / "stale").write_bytes(b"plain")
    assert write_atomically(tmp_path, {"a": (b"new", 0o644), "dir/x": (b"new", 0o644)})
    assert (tmp_path / "a").is_symlink() and (tmp_path / "dir").is_symlink()
    assert (tmp_path / "dir" / "x").read_bytes() == b"new"
    assert not os.path.lexists(tmp_path / "stale")


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Threads switch as often as the interpreter allows, so a reader lands between any two steps."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_a_reader_never_sees_a_key_missing_or_half_written(tmp_path: Path, busy_switching: None) -> None:
    versions = [{"tls.crt": (bytes([65 + n % 26]) * 16384, 0o644), "tls.key": (b"%d" % n * 100, 0o600)}
                for n in range(400)]
    valid = {key: {files[key][0] for files in versions} for key in versions[0]}
    write_atomically(tmp_path, versions[0])
    done = threading.Event()
    problems: list[str] = []
    reads = [0]

    def read() -> None:
        while not done.is_set():
            for key in valid:
                try:
                    content = (tmp_path / key).read_bytes()
                except OSError as e:
                    problems.append(f"{key}: {e!r}")
                    continue
                reads[0] += 1
                if content not in valid[key]:
                    problems.append(f"{key}: {len(content)} bytes, not one of the versions written")

    readers = [threading.Thread(target=read, daemon=True) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for files in versions[1:]:
            assert write_atomically(tmp_path, files)
    finally:
        done.set()
        for reader in readers:
            reader.join(10)
    assert reads[0] > len(versions), f"the readers only read {reads[0]} times"
    assert not problems, f"{len(problems)} bad reads during updates, e.g. {problems[:3]}"

"""The operators' image as `make image` builds it (scripts/build-image.sh), built once per test run:
the first caller of a run builds it (one build at a time on this machine: parallel workers wait on a
file lock), later callers of the same run (pytest-xdist's workers) reuse its name."""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kube_sandbox.binaries import cache_dir

ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = ROOT / "scripts" / "build-image.sh"
LOCAL_REGISTRY = "localhost"  # where buildah keeps what it built; the sandbox runs such images in runc
_built: dict[str, str] = {}


def _run_id() -> str:
    """Shared by the workers of one pytest-xdist run; the process id without xdist."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"


def build_image() -> str:
    """The image's name (`etcd-operator-py:<version>`), built or found current for this run."""
    run = _run_id()
    if run in _built:
        return _built[run]
    lock_path = cache_dir() / "image-build.lock"
    stamp = cache_dir() / f"image-build.{_checkout_key()}.run"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded_run, _, name = (stamp.read_text() if stamp.exists() else "").partition(" ")
        if recorded_run != run or not name.strip():
            result = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=1800,
                                    check=False)
            assert result.returncode == 0, f"scripts/build-image.sh failed (exit {result.returncode}):\n{result.stderr[-6000:]}"
            name = result.stdout.strip().splitlines()[-1]
            stamp.write_text(f"{run} {name}")
    _built[run] = name.strip()
    return _built[run]


def local_image_reference() -> tuple[str, str]:
    """(repository, tag) of the built image as pods name it to run it in runc (`localhost/...`)."""
    repository, _, tag = build_image().rpartition(":")
    if "/" not in repository:
        repository = f"{LOCAL_REGISTRY}/{repository}"
    return repository, tag


@contextmanager
def relocated_image(repository: str) -> Iterator[str]:
    """The built image tagged into another repository of the local store (`localhost/<repository>`),
    as a user moves it to their registry: its name, which the sandbox runs in runc. Untagged after
    (a later build would leave the old image behind that name)."""
    _, tag = local_image_reference()
    name = f"{LOCAL_REGISTRY}/{repository}:{tag}"
    result = subprocess.run(["buildah", "tag", ":".join(local_image_reference()), name], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, f"buildah tag failed: {result.stderr}"
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rmi", name], capture_output=True, timeout=120, check=False)


def name_image(manifests: str, image: str) -> str:
    """deploy/*.yaml naming `image` wherever they name the operators' (`etcd-operator-py:<version>`:
    the containers, the fetch images, OPERATOR_IMAGE), as scripts/demo.sh deploys them."""
    return re.sub(r"(?<=[ \"])etcd-operator-py:[0-9A-Za-z._-]+", image, manifests)


def _checkout_key() -> str:
    """Worktrees of one machine build the same tag from different sources: one stamp each."""
    return hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]


def runc_evidence(pid: int) -> list[str]:
    """What says that process `pid` is not a real container's first process: [] when it is runc's
    child, pid 1 of a PID namespace of its own, on a root filesystem that is not the host's."""
    proc = Path(f"/proc/{pid}")
    fields = dict(line.split(":\t", 1) for line in (proc / "status").read_text().splitlines() if ":\t" in line)
    problems = []
    if Path(f"/proc/{fields['PPid'].strip()}/comm").read_text().strip() != "runc":
        problems.append(f"its parent is not runc: {fields['PPid'].strip()}")
    if fields["NSpid"].split()[1:] != ["1"]:
        problems.append(f"not pid 1 of its own PID namespace: NSpid {fields['NSpid'].strip()}")
    if os.stat(proc / "root").st_dev == os.stat("/").st_dev:
        problems.append("its root is the host's")
    return problems

"""The operators' image, as built by `make image` (scripts/build-image.sh), run in a real OCI runtime:
runc, host network, as the image's user, read-only root filesystem (what deploy/ asks of the pods).
The image is built (or found current, in seconds, from buildah's layer cache) once per session."""
from __future__ import annotations

import configparser
import errno
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api.constants import DEFAULT_VERSION
from kube_sandbox.kubelet.runc import ContainerConfig, Mount, write_bundle
from tests.integration.packaging.built_image import build_image

ROOT = Path(__file__).resolve().parents[3]
IMAGE_UID = 10001  # deploy/*.yaml runAsUser / runAsGroup
# Far above today's (about 380 MB); a jump past it means something that does not belong got in.
SIZE_BUDGET_BYTES = 600 * 1000 * 1000
# The test infrastructure, which setup.cfg keeps out of `pip install .`.
TEST_INFRASTRUCTURE_PACKAGES = ("kube_sandbox", "benchmarks", "tests")
RUN_TIMEOUT_SECONDS = 120
CONTAINER_PREFIX = "etcd-operator-py-image-test-"  # + pid of the test process + random

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="builds with buildah's root storage and runs runc: needs root")


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def console_scripts() -> list[str]:
    lines = _setup_cfg()["options.entry_points"]["console_scripts"].strip().splitlines()
    return [line.split("=")[0].strip() for line in lines]


def extra_test_distributions() -> set[str]:
    """Distribution names of setup.cfg's `test` extra, normalised (PEP 503)."""
    requirements = _setup_cfg()["options.extras_require"]["test"].strip().splitlines()
    return {_normalise(re.split(r"[\[<>=!~; ]", line.strip(), maxsplit=1)[0]) for line in requirements if line.strip()}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _size_bytes(text: str) -> float:
    """buildah's human size (`379 MB`, `1.2 GB`) in bytes."""
    number, unit = text.split()
    return float(number) * {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"exit {self.returncode}\nstdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-2000:]}"


@dataclass(frozen=True)
class Image:
    name: str
    size: str
    config: dict[str, Any]  # the OCI image config (User, Env, Entrypoint, WorkingDir, ...)
    rootfs: Path  # the image mounted read-only from buildah's storage
    work_dir: Path

    @property
    def user(self) -> tuple[int, int]:
        uid, _, gid = str(self.config["User"]).partition(":")
        return int(uid), int(gid or uid)

    def run(self, *args: str) -> Run:
        """Run `args` (an empty tuple: the image's entry point) with runc, as a pod's container would:
        the image's user, env and working directory, read-only root with an in-memory /tmp (as
        deploy/ mounts), host network, no capabilities."""
        process_args = list(args) if args else [*(self.config.get("Entrypoint") or []), *(self.config.get("Cmd") or [])]
        uid, gid = self.user
        bundle = write_bundle(self.work_dir / f"bundle-{uuid.uuid4().hex[:8]}", ContainerConfig(
            args=process_args, env=dict(entry.partition("=")[::2] for entry in self.config.get("Env") or []),
            cwd=str(self.config.get("WorkingDir") or "/"), rootfs=self.rootfs, uid=uid, gid=gid,
            read_only_root=True, capabilities=(), no_new_privileges=True, hostname="image-test",
            mounts=(
                # the in-memory emptyDir every manifest of deploy/ and examples/ mounts there
                Mount("/tmp", tmpfs_options=("mode=1777", "size=16m")),
                # the host's resolver, as a kubelet gives a hostNetwork pod
                Mount("/etc/resolv.conf", "/etc/resolv.conf", read_only=True),
            )))
        try:
            result = subprocess.run(
                ["runc", "--root", str(self.work_dir / "runc-state"), "run", "--bundle", str(bundle), f"image-test-{uuid.uuid4().hex[:12]}"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
        finally:
            shutil.rmtree(bundle, ignore_errors=True)
        return Run(result.returncode, result.stdout, result.stderr)


def _buildah(*args: str) -> str:
    return subprocess.run(["buildah", *args], capture_output=True, text=True, check=True, timeout=300).stdout.strip()


def _remove_containers_of_ended_sessions() -> None:
    """The working containers (image mounts) of sessions that were killed before their teardown."""
    for container in _buildah("containers", "--format", "{{.ContainerName}}").splitlines():
        if container.startswith(CONTAINER_PREFIX):
            pid = int(container[len(CONTAINER_PREFIX):].split("-")[0])
            if not Path(f"/proc/{pid}").exists():
                subprocess.run(["buildah", "rm", container], capture_output=True, check=False, timeout=120)


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Image]:
    name = build_image()
    inspected = json.loads(_buildah("inspect", "--type", "image", name))
    size = json.loads(_buildah("images", "--json", name))[0]["size"]
    # Shown without -s (under pytest-xdist, scripts/test.sh's own build prints it).
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nimage {name}: {size}")
    _remove_containers_of_ended_sessions()
    container = _buildah("from", "--pull-never", "--name", f"{CONTAINER_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}",
                         name).splitlines()[-1]
    try:
        rootfs = Path(_buildah("mount", container))
        yield Image(name, size, inspected["OCIv1"]["config"], rootfs, tmp_path_factory.mktemp("image"))
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False, timeout=120)


@pytest.mark.parametrize("script", console_scripts())
def test_every_console_script_starts_and_prints_its_help(image: Image, script: str) -> None:
    run = image.run(script, "--help")
    assert run.returncode == 0, f"{script} --help in {image.name}: {run}"
    assert run.stdout.startswith("usage: "), f"{script} --help in {image.name}: {run}"


def test_the_entry_point_is_the_etcd_operator(image: Image) -> None:
    assert image.config["Entrypoint"] == ["etcd-operator"]
    run = image.run(*image.config["Entrypoint"], "--help")
    assert run.returncode == 0 and "usage: etcd-operator" in run.stdout, str(run)


def test_it_runs_as_uid_10001(image: Image) -> None:
    assert image.user == (IMAGE_UID, IMAGE_UID), f"image config User is {image.config['User']!r}"
    run = image.run("python3", "-c", "import os, pwd; print(os.getuid(), os.getgid(), pwd.getpwuid(os.getuid()).pw_name)")
    assert run.returncode == 0, str(run)
    assert run.stdout.split() == [str(IMAGE_UID), str(IMAGE_UID), "etcd-operator"], str(run)


def test_the_root_filesystem_is_read_only_and_that_works(image: Image) -> None:
    """The operators start on a read-only root (the --help runs above); a write outside /tmp is
    refused by the file system (EROFS), not merely by permissions: the root was read-only."""
    run = image.run("python3", "-c", "open('/tmp/probe', 'w').write('ok'); open('/app/probe', 'w')")
    assert run.returncode != 0 and f"[Errno {errno.EROFS}]" in run.stderr, str(run)


@pytest.mark.parametrize("program", ["etcdctl", "etcdutl"])
def test_etcdctl_and_etcdutl_are_the_pinned_version(image: Image, program: str) -> None:
    run = image.run(program, "version")
    assert run.returncode == 0, str(run)
    assert f"{program} version: {DEFAULT_VERSION}" in run.stdout.splitlines(), str(run)


def test_no_test_only_package_inside(image: Image) -> None:
    listing = ("import importlib.metadata as m, importlib.util as u; "
               "print('\\n'.join(d.metadata['Name'] for d in m.distributions())); "
               f"print('\\n'.join('module:' + n for n in {TEST_INFRASTRUCTURE_PACKAGES!r} if u.find_spec(n)))")
    run = image.run("python3", "-c", listing)
    assert run.returncode == 0, str(run)
    lines = run.stdout.splitlines()
    installed = {_normalise(line) for line in lines if not line.startswith("module:")}
    assert "etcd-operator-py" in installed, sorted(installed)
    assert "kubernetes" in installed, sorted(installed)
    assert not installed & extra_test_distributions(), f"test-only distributions in {image.name}: {sorted(installed & extra_test_distributions())}"
    assert not [line for line in lines if line.startswith("module:")], f"test infrastructure in {image.name}: {lines}"


def test_the_size_is_within_budget(image: Image) -> None:
    print(f"image {image.name}: {image.size}")
    assert _size_bytes(image.size) < SIZE_BUDGET_BYTES, f"{image.name} is {image.size}, over {SIZE_BUDGET_BYTES / 1e6:.0f} MB"

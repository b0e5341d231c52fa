"""Containers from locally built OCI images, run by `runc` on the host network.

A pod's container whose image is in buildah's local storage under `localhost/` (what `make image`
builds: `localhost/etcd-operator-py:<version>`) runs as a real container: the image's root
filesystem (a buildah working container, one per pod container), its own PID, IPC, UTS and mount
namespaces, no network namespace (pod IPs are loopback aliases, so the pod's addresses and the
apiserver's work as for process containers), the pod's volumes bind-mounted at their mountPaths,
the image's user or the securityContext's. `runtime_spec` makes the bundle's config.json (pure);
`LocalImages` finds images and mounts their root filesystems; `RuncProcess` is a `ContainerProcess`
whose process is `runc run` (in the foreground: runc waits for the container and exits with its
status) and whose signals go to the container's own process group.
"""
from __future__ import annotations

import json
import logging
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet.containers import ContainerProcess, ProcessSpec, signal_group

log = logging.getLogger(__name__)

LOCAL_REGISTRY = "localhost"  # buildah's (and podman's) registry name for images built here
COMMAND_TIMEOUT_SECONDS = 60.0
CREATE_TIMEOUT_SECONDS = 60.0  # from `runc run` to the container's first process
# What a container runtime grants a container by default (containerd's and CRI-O's list).
DEFAULT_CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
    "CAP_AUDIT_WRITE",
)
CAPABILITY_SETS = ("bounding", "effective", "permitted")


class LocalImageError(RuntimeError):
    """The local image store could not do what was asked (the message says what buildah said)."""


@dataclass(frozen=True)
class Mount:
    """A mount in the container: a host path bound at `destination`, or a tmpfs (`source` "")."""

    destination: str
    source: str = ""
    read_only: bool = False
    tmpfs_options: tuple[str, ...] = ()

    def as_spec(self) -> dict[str, Any]:
        if not self.source:
            return {"destination": self.destination, "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "nodev", *self.tmpfs_options]}
        return {"destination": self.destination, "type": "bind", "source": self.source,
                "options": ["rbind", "rprivate", "ro" if self.read_only else "rw"]}


@dataclass(frozen=True)
class ContainerConfig:
    """What the runtime spec of one container run is made from."""

    args: Sequence[str]
    env: Mapping[str, str]
    cwd: str
    rootfs: Path
    uid: int
    gid: int
    additional_gids: tuple[int, ...] = ()
    read_only_root: bool = False
    mounts: tuple[Mount, ...] = ()
    hostname: str = "container"
    capabilities: tuple[str, ...] = DEFAULT_CAPABILITIES
    no_new_privileges: bool = False
    cgroups_path: str = ""  # "": runc's default, a group named after the container under its own
    rlimit_nofile: int = field(default_factory=lambda: resource.getrlimit(resource.RLIMIT_NOFILE)[1])  # the runtime's own


# The kernel file systems every container gets, before the pod's volumes.
SYSTEM_MOUNTS: tuple[dict[str, Any], ...] = (
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
     "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
    {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
     "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
    {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
)


def runtime_spec(config: ContainerConfig) -> dict[str, Any]:
    """The OCI runtime spec (a bundle's config.json) of a container on the host network: no network
    namespace, so loopback addresses (pod IPs, the apiserver) are the host's."""
    capabilities = list(config.capabilities)
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": config.uid, "gid": config.gid,
                     **({"additionalGids": list(config.additional_gids)} if config.additional_gids else {})},
            "args": list(config.args),
            "env": [f"{key}={value}" for key, value in config.env.items()],
            "cwd": config.cwd or "/",
            "capabilities": {**{kind: capabilities for kind in CAPABILITY_SETS},
                             # a non-root user keeps none in effect (no ambient capabilities), as with a real runtime
                             **({"effective": [], "permitted": []} if config.uid != 0 else {})},
            "noNewPrivileges": config.no_new_privileges,
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": config.rlimit_nofile, "soft": config.rlimit_nofile}],
        },
        "root": {"path": str(config.rootfs), "readonly": config.read_only_root},
        "hostname": config.hostname,
        "mounts": [*SYSTEM_MOUNTS, *(m.as_spec() for m in config.mounts)],
        "linux": {
            "namespaces": [{"type": kind} for kind in ("pid", "ipc", "uts", "mount")],
            **({"cgroupsPath": config.cgroups_path} if config.cgroups_path else {}),
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
                            "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"],
            "readonlyPaths": ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
        },
    }


def write_bundle(bundle: Path, config: ContainerConfig) -> Path:
    """A bundle directory holding config.json (the root filesystem stays where it is mounted)."""
    bundle.mkdir(parents=True, exist_ok=True)
    path = bundle / "config.json"
    path.write_text(json.dumps(runtime_spec(config), indent=1))
    return bundle


def parse_user(user: str, passwd: str = "", group: str = "") -> tuple[int, int]:
    """An image config's User (`uid`, `uid:gid`, `name`, `name:group`; "" is root) as numbers, names
    looked up in the image's /etc/passwd and /etc/group texts."""
    name, _, group_name = (user or "0").partition(":")

    def lookup(text: str, key: str) -> dict[str, str]:
        table = {}
        for line in text.splitlines():
            fields = line.split(":")
            if len(fields) > 3:
                table[fields[0]] = fields[2] if key == "id" else fields[3]
        return table

    if name.isdigit():
        uid = int(name)
        primary = next((int(f.split(":")[3]) for f in passwd.splitlines()
                        if len(f.split(":")) > 3 and f.split(":")[2] == name), uid)
    elif name in lookup(passwd, "id"):
        uid, primary = int(lookup(passwd, "id")[name]), int(lookup(passwd, "gid")[name])
    else:
        raise LocalImageError(f"user {name!r} is not in the image's /etc/passwd")
    if not group_name:
        return uid, primary
    if group_name.isdigit():
        return uid, int(group_name)
    groups = lookup(group, "id")
    if group_name not in groups:
        raise LocalImageError(f"group {group_name!r} is not in the image's /etc/group")
    return uid, int(groups[group_name])


@dataclass(frozen=True)
class LocalImage:
    name: str  # as the pod names it
    image_id: str  # the image's ID in the store (sha256 hex)
    config: Mapping[str, Any]  # the OCI image config: User, Env, Entrypoint, Cmd, WorkingDir

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, _, v in (str(e).partition("=") for e in self.config.get("Env") or []))


@dataclass
class LocalImages:
    """Images in buildah's local storage, and their root filesystems mounted for containers (one
    buildah working container each, named `<prefix><name>`)."""

    prefix: str  # names this kubelet's working containers: `ksb-<instance>-`
    buildah: tuple[str, ...] = ("buildah",)
    run: Callable[..., subprocess.CompletedProcess[str]] = field(default=subprocess.run)

    def _buildah(self, *args: str) -> str:
        try:
            result = self.run([*self.buildah, *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS,
                              check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise LocalImageError(f"buildah {args[0]}: {e}") from e
        if result.returncode != 0:
            raise LocalImageError(f"buildah {' '.join(args)}: {result.stderr.strip()[-500:]}")
        return str(result.stdout).strip()

    def find(self, name: str) -> LocalImage:
        """The image `name` (`localhost/repo:tag`); LocalImageError when the store lacks it."""
        inspected = json.loads(self._buildah("inspect", "--type", "image", name))
        return LocalImage(name, str(inspected.get("FromImageID") or ""), inspected["OCIv1"].get("config") or {})

    def mount(self, image: LocalImage, name: str) -> Path:
        """The root filesystem of working container `<prefix><name>` (made from `image` if it does
        not exist yet), mounted."""
        container = self.prefix + name
        existing = self._buildah("containers", "--format", "{{.ContainerName}}").splitlines()
        if container not in existing:
            self._buildah("from", "--pull-never", "--name", container, image.image_id or image.name)
        return Path(self._buildah("mount", container).splitlines()[-1])

    def remove(self, name: str) -> None:
        try:
            self._buildah("rm", self.prefix + name)
        except LocalImageError as e:
            log.warning("root filesystem of %s not removed: %s", name, e)

    def remove_leftovers(self) -> list[str]:
        """At kubelet start: the working containers an earlier kubelet of this sandbox left."""
        try:
            names = [n for n in self._buildah("containers", "--format", "{{.ContainerName}}").splitlines()
                     if n.startswith(self.prefix)]
        except LocalImageError as e:
            log.warning("could not list buildah's working containers: %s", e)
            return []
        for name in names:
            self.remove(name[len(self.prefix):])
        return names


def is_local_image(image: str) -> bool:
    """Images the kubelet runs with runc: named in the local registry, as buildah names what it built."""
    return image.strip().startswith(f"{LOCAL_REGISTRY}/")


def runc_argv(root: Path, *args: str) -> list[str]:
    return ["runc", "--root", str(root), *args]


class RuncProcess(ContainerProcess):
    """One run of a container by `runc run`. `pid` is the container's first process (as the host
    sees it) once it exists; signals go to its process group, as to a process container's."""

    def __init__(self, spec: ProcessSpec, on_exit: Callable[[], None], root: Path, container: str) -> None:
        super().__init__(spec, on_exit)
        self.root = root
        self.container = container
        self._container_pid: int | None = None

    @staticmethod
    def command(root: Path, bundle: Path, container: str, pid_file: Path) -> list[str]:
        return runc_argv(root, "run", "--bundle", str(bundle), "--pid-file", str(pid_file), container)

    @property
    def pid(self) -> int | None:
        return self._container_pid

    @property
    def runc_pid(self) -> int | None:
        return super().pid

    @property
    def container_id(self) -> str:
        return f"runc://{self.container}" if self._container_pid else ""

    def start(self) -> int:
        """Start `runc run` and wait until the container's first process exists (its pid file);
        OSError when runc ends before that (the log says why)."""
        pid_file = self._runc_pid_file
        pid_file.unlink(missing_ok=True)
        super().start()
        deadline = time.monotonic() + CREATE_TIMEOUT_SECONDS
        while not self.exited.wait(0.02):
            text = pid_file.read_text().strip() if pid_file.exists() else ""
            if text:
                self._container_pid = int(text)
                return self._container_pid
            if time.monotonic() > deadline:
                self._delete()
                break
        raise OSError(f"runc did not start container {self.container} (see {self.spec.log_path})")

    @property
    def _runc_pid_file(self) -> Path:
        return Path(self.spec.argv[self.spec.argv.index("--pid-file") + 1])

    def send(self, sig: int) -> bool:
        if not self.running() or self._container_pid is None:
            return False
        return signal_group(self._container_pid, sig)

    def _after_exit(self) -> None:
        self._delete()  # runc removes a container it saw end; one it did not (runc killed) is removed here

    def kill(self) -> None:
        super().kill()
        if self.running() and self.runc_pid is not None:  # the container is gone, runc hangs on: end it
            signal_group(self.runc_pid, signal.SIGKILL)
            self.exited.wait(1.0)
        self._delete()

    def _delete(self) -> None:
        delete_container(self.root, self.container)


def delete_container(root: Path, container: str) -> None:
    subprocess.run(runc_argv(root, "delete", "--force", container), capture_output=True, check=False,
                   timeout=COMMAND_TIMEOUT_SECONDS)


def delete_all(root: Path) -> list[str]:
    """At kubelet start and stop: the containers (and their processes) of runc state `root`."""
    if not root.is_dir():
        return []
    result = subprocess.run(runc_argv(root, "list", "--quiet"), capture_output=True, text=True, check=False,
                            timeout=COMMAND_TIMEOUT_SECONDS)
    containers = result.stdout.split() if result.returncode == 0 else []
    for container in containers:
        delete_container(root, container)
    if containers:
        log.warning("deleted %d runc containers left by an earlier run: %s", len(containers), containers)
    return containers

"""One worker thread per pod bound to one of the kubelet's nodes: runs its containers as processes
and reports status.

The worker is level-triggered: every sync looks at the latest pod object and at its processes and
takes the next step (set up volumes, start the next init container, restart a crashed container
after its back-off, terminate on deletion), then publishes the pod status if it changed.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kube_sandbox.kubelet import events
from kube_sandbox.kubelet.cgroups import CgroupLayout, PodCgroups, container_limits, join_argv
from kube_sandbox.kubelet.containers import (
    ContainerProcess,
    ProcessSpec,
    argv_as_user,
    now_rfc3339,
    require_executable,
)
from kube_sandbox.kubelet.environment import ContainerConfigError, build_environment, expand
from kube_sandbox.kubelet.images import POD_IP_ENV, ImageCatalog, ImageNotAvailable, ImageRuntime, container_argv
from kube_sandbox.kubelet.ipam import IpAllocator
from kube_sandbox.kubelet.kube_api import ApiError, Conflict, KubeApi, NotFound, object_path, pod_path
from kube_sandbox.kubelet.partitions import Partitions
from kube_sandbox.kubelet.probes import (
    LIVENESS,
    READINESS,
    STARTUP,
    ExecCheck,
    HttpGetCheck,
    InvalidProbe,
    Probe,
    ProbeLoop,
    ProbeTarget,
    parse_probe,
    run_check,
)
from kube_sandbox.kubelet.rewrites import Rewriter
from kube_sandbox.kubelet.runc import (
    DEFAULT_CAPABILITIES,
    ContainerConfig,
    LocalImageError,
    LocalImages,
    Mount,
    RuncProcess,
    is_local_image,
    parse_user,
    runc_argv,
    write_bundle,
)
from kube_sandbox.kubelet.settings import KubeletSettings
from kube_sandbox.kubelet.volumes import (
    SERVICE_ACCOUNT_MOUNT_PATH,
    SUB_PATHS_DIR,
    VOLUME_REFRESH_SECONDS,
    PreparedVolumes,
    VolumeManager,
    VolumeNotReady,
    decode_config_map,
    decode_secret,
    pod_directory,
    snapshot_sub_path,
)

log = logging.getLogger(__name__)

# The real kubelet backs off 10s doubling to 5 min; the sandbox is tuned for fast tests.
RESTART_BACKOFF_INITIAL_SECONDS = 1.0
RESTART_BACKOFF_MAX_SECONDS = 30.0
BACKOFF_RESET_SECONDS = 2 * RESTART_BACKOFF_MAX_SECONDS  # a run this long forgives earlier crashes
# Sandbox-only, per pod (the real kubelet's per-node `crashLoopBackOff.maxContainerRestartPeriod`):
# a lower cap on the restart back-off, for tests that crash a container on purpose many times.
MAX_RESTART_BACKOFF_ANNOTATION = "kube-sandbox.test/max-restart-backoff-seconds"
SYNC_SECONDS = 1.0  # resync interval when nothing wakes the worker
SETUP_RETRY_SECONDS = 2.0  # volumes/config that are not there yet
IMAGE_PULL_BACKOFF_AFTER_SECONDS = 5.0  # ErrImagePull turns into ImagePullBackOff
DEFAULT_GRACE_SECONDS = 30
POST_START_TIMEOUT_SECONDS = 30.0
SERVICE_ACCOUNT_DIR_ENV = "KUBERNETES_SERVICE_ACCOUNT_DIR"
VOLUME_ENV_PREFIX = "SANDBOX_VOLUME_"
TERMINAL_PHASES = ("Succeeded", "Failed")


class PodLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return f"{self.extra['pod']}: {msg}", kwargs  # type: ignore[index]


@dataclass
class PodServices:
    """What the pod workers of one node share: clients, the node's address range, its state flags."""

    api: KubeApi
    settings: KubeletSettings
    node_name: str
    ipam: IpAllocator  # this node's pod addresses
    images: ImageCatalog
    volumes: VolumeManager
    events: events.EventRecorder
    stop: threading.Event  # the kubelet is shutting down
    node_down: threading.Event  # stop_node() fault on this node: act on nothing until start_node()
    on_worker_done: Callable[[str], None]  # uid; called after the pod is gone for good
    on_address_assigned: Callable[[str, str], None]  # (uid, ip); before any container starts
    cgroups: CgroupLayout | None = None  # None: pods run without cgroups (cgroups.py)
    partitions: Partitions | None = None  # the cuts in force, whose rules name pods' cgroups
    local_images: LocalImages | None = None  # root filesystems of local images' containers (runc.py)


@dataclass(frozen=True)
class Terminated:
    exit_code: int
    reason: str
    started_at: str
    finished_at: str
    container_id: str = ""
    message: str = ""

    def as_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"exitCode": self.exit_code, "reason": self.reason,
                                 "startedAt": self.started_at or None, "finishedAt": self.finished_at or None}
        if self.exit_code > 128:
            state["signal"] = self.exit_code - 128
        if self.container_id:
            state["containerID"] = self.container_id
        if self.message:
            state["message"] = self.message
        return {"terminated": state}


TERMINATION_MESSAGE_MAX_LINES = 80  # what the kubelet takes from the log for FallbackToLogsOnError
TERMINATION_MESSAGE_MAX_BYTES = 2048


def termination_message_from_log(log_path: Path) -> str:
    """The tail of a failed container's log, as the kubelet's `FallbackToLogsOnError` reports it
    (no termination-message file exists here, so the log is always the fallback)."""
    try:
        with open(log_path, "rb") as log_file:
            log_file.seek(0, os.SEEK_END)
            size = log_file.tell()
            log_file.seek(max(0, size - 64 * 1024))
            tail = log_file.read()
    except OSError:
        return ""
    lines = tail.decode("utf-8", "replace").splitlines()[-TERMINATION_MESSAGE_MAX_LINES:]
    return "\n".join(lines).encode()[-TERMINATION_MESSAGE_MAX_BYTES:].decode("utf-8", "ignore")


@dataclass
class ContainerRun:
    """One process of a container, with its probe threads."""

    process: ContainerProcess
    probes: dict[str, Probe]
    stop: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    ready: bool = False
    kill_message: str = ""
    began: float = field(default_factory=time.monotonic)
    oom_kills_at_start: int = 0  # the container's memory group's OOM kill count when this run began

    @property
    def is_ready(self) -> bool:
        return self.process.running() and self.started.is_set() and (READINESS not in self.probes or self.ready)


@dataclass
class ContainerState:
    """A container across its restarts."""

    spec: dict[str, Any]
    init: bool
    runtime: ImageRuntime | None = None
    image_error: str = ""
    image_error_since: float = 0.0
    restart_count: int = 0
    has_run: bool = False  # the next start is a restart
    run: ContainerRun | None = None
    last_termination: Terminated | None = None  # lastState
    terminated: Terminated | None = None  # state, once it will not be restarted
    done: bool = False  # finished for good (init: succeeded; others: not restarted)
    waiting: tuple[str, str] = ("ContainerCreating", "")
    restart_at: float = 0.0
    backoff_seconds: float = 0.0  # delay before the next restart
    shown_backoff: float = 0.0
    replace_pending: bool = False  # the spec changed: restart at once, whatever the policy
    config_retry_at: float = 0.0

    @property
    def name(self) -> str:
        return str(self.spec["name"])


@dataclass(frozen=True)
class ContainerView:
    """What the pod phase depends on, per app container."""

    running: bool
    exit_code: int | None = None  # set once terminated for good (no restart coming)
    restarting: bool = False  # terminated, waiting to be restarted


def pod_phase(restart_policy: str, *, initialized: bool, init_failed: bool, containers: list[ContainerView]) -> str:
    """The pod phase from its containers, following the real kubelet's getPhase."""
    if init_failed:
        return "Failed"
    if not initialized:
        return "Pending"
    running = sum(c.running for c in containers)
    stopped = sum(c.exit_code is not None or c.restarting for c in containers)
    succeeded = sum(c.exit_code == 0 for c in containers)
    waiting = len(containers) - running - stopped
    if waiting or not containers:
        return "Pending"
    if running or restart_policy == "Always":
        return "Running"
    if succeeded == len(containers):
        return "Succeeded"
    if restart_policy == "Never":
        return "Failed"
    return "Running"


def max_restart_backoff(pod: dict[str, Any]) -> float:
    """The longest restart back-off for `pod`'s containers: RESTART_BACKOFF_MAX_SECONDS, or lower
    (not below the initial back-off) by MAX_RESTART_BACKOFF_ANNOTATION; a bad value is ignored."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(MAX_RESTART_BACKOFF_ANNOTATION)
    try:
        return min(RESTART_BACKOFF_MAX_SECONDS, max(RESTART_BACKOFF_INITIAL_SECONDS, float(str(value))))
    except ValueError:
        return RESTART_BACKOFF_MAX_SECONDS


def status_overwritten(published: dict[str, Any] | None, pod: dict[str, Any]) -> bool:
    """Whether the pod's status in the API no longer says what this kubelet last published: its
    phase or a condition changed by someone else. The node-lifecycle controller sets Ready=False
    on every pod of a node whose heartbeat lapsed (e.g. while the apiserver restarted); a kubelet
    that compared only with its own last report would never set it back. (A stale watch event
    also counts: it costs one extra, identical status patch.)"""
    if published is None:
        return False
    found = pod.get("status") or {}

    def conditions(status: dict[str, Any]) -> dict[str, str]:
        return {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []}
    return found.get("phase") != published.get("phase") or conditions(found) != conditions(published)


class PodWorker:
    def __init__(self, pod: dict[str, Any], services: PodServices) -> None:
        metadata = pod["metadata"]
        self.uid: str = metadata["uid"]
        self.namespace: str = metadata["namespace"]
        self.name: str = metadata["name"]
        self.pod = pod
        self.services = services
        self.log = PodLog(log, {"pod": f"{self.namespace}/{self.name}"})
        self.lock = threading.RLock()
        self.wake_event = threading.Event()
        self.deleted = False  # the object is gone from the API
        self.finished = threading.Event()
        self.ip: str | None = None
        self.cgroups = PodCgroups(services.cgroups, self.uid) if services.cgroups else None
        self.volumes: PreparedVolumes | None = None
        self.setup_message = ""
        self.next_setup_attempt = 0.0
        self.images_resolved = False
        self.terminal = False
        self.last_status: dict[str, Any] | None = None
        self.transitions: dict[str, tuple[str, str]] = {}  # condition type -> (status, lastTransitionTime)
        status = pod.get("status") or {}
        self.start_time: str = status.get("startTime") or now_rfc3339()
        spec = pod.get("spec") or {}
        self.init_states = [ContainerState(dict(c), init=True) for c in spec.get("initContainers") or []]
        self.states = [ContainerState(dict(c), init=False) for c in spec.get("containers") or []]
        self._recover(status)
        self.thread = threading.Thread(target=self._loop, name=f"pod-{self.namespace}/{self.name}", daemon=True)

    # ----------------------------------------------------------------- lifecycle

    def _recover(self, status: dict[str, Any]) -> None:
        """Continue from a status written by an earlier kubelet run (the processes did not survive)."""
        if status.get("phase") in TERMINAL_PHASES:
            self.terminal = True
            return
        previous = {s["name"]: s for s in [*(status.get("initContainerStatuses") or []),
                                           *(status.get("containerStatuses") or [])]}
        initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                          for c in status.get("conditions") or [])
        for st in [*self.init_states, *self.states]:
            old = previous.get(st.name)
            if not old:
                continue
            st.restart_count = int(old.get("restartCount") or 0)
            state = old.get("state") or {}
            st.has_run = bool(state.get("running") or state.get("terminated") or old.get("lastState"))
            if st.init and initialized:
                st.done = True
                st.terminated = Terminated(0, "Completed", "", "")
        for condition in status.get("conditions") or []:
            self.transitions[condition["type"]] = (condition.get("status", ""),
                                                   condition.get("lastTransitionTime") or now_rfc3339())

    def start(self) -> None:
        self.thread.start()

    def wake(self) -> None:
        self.wake_event.set()

    def update(self, pod: dict[str, Any]) -> None:
        with self.lock:
            self.pod = pod
            if status_overwritten(self.last_status, pod):
                self.last_status = None  # published again on the next sync
        self.wake()

    def mark_deleted(self) -> None:
        with self.lock:
            self.deleted = True
        self.wake()

    def _loop(self) -> None:
        try:
            while not self.services.stop.is_set():
                self.wake_event.clear()
                try:
                    if self._sync():
                        return
                except Exception:
                    self.log.exception("sync failed; retrying in %.0fs", SYNC_SECONDS)
                self.wake_event.wait(self._next_wait())
        finally:
            self.finished.set()

    def _next_wait(self) -> float:
        wait = SYNC_SECONDS
        now = time.monotonic()
        for st in [*self.init_states, *self.states]:
            if st.run is None and not st.done and st.restart_at > now:
                wait = min(wait, st.restart_at - now)
        return max(wait, 0.05)

    def _sync(self) -> bool:
        """One step toward the desired state; True once the pod is gone and cleaned up."""
        if self.deleted:
            self._kill_everything(grace_seconds=0)
            self._cleanup()
            return True
        if self.services.node_down.is_set():
            return False
        if (self.pod.get("metadata") or {}).get("deletionTimestamp"):
            self._terminate_gracefully()
            if not self._delete_object():
                return False  # retried on the next sync; the processes are gone already
            self._cleanup()
            return True
        with self.lock:
            # node_down again under the lock: a stop_node() that came meanwhile must not miss a process.
            if self.terminal or self.services.node_down.is_set():
                return False
            self._apply_spec_changes()
            if self._set_up():
                self._refresh_tokens()
                self._refresh_volume_contents()
                self._drive_containers()
            status = self._build_status()
        self._publish(status)
        return False

    # ----------------------------------------------------------------- set-up

    def _set_up(self) -> bool:
        """Address, images and volumes; False while something is not ready yet (retried)."""
        if self.ip is None:
            if (self.pod.get("spec") or {}).get("hostNetwork"):
                self.ip = self.services.settings.host_ip
            else:
                self.ip = self.services.ipam.allocate(self.uid)
                self.log.info("assigned pod IP %s", self.ip)
                self.services.on_address_assigned(self.uid, self.ip)
        if not self.images_resolved:
            for st in [*self.init_states, *self.states]:
                self._resolve_image(st)
            self.images_resolved = True
        if self.volumes is not None:
            return True
        if time.monotonic() < self.next_setup_attempt:
            return False
        try:
            self.volumes = self.services.volumes.prepare(self.pod, self.ip)
            self.setup_message = ""
            return True
        except (VolumeNotReady, ContainerConfigError) as e:
            if str(e) != self.setup_message:
                self.log.info("volumes not ready: %s; retrying every %.0fs", e, SETUP_RETRY_SECONDS)
                self.services.events.record(self.pod, events.WARNING, "FailedMount", f"MountVolume.SetUp failed: {e}")
            self.setup_message = str(e)
        except ApiError as e:
            self.setup_message = f"could not read volume sources: {e}"
            self.log.warning("%s", self.setup_message)
        self.next_setup_attempt = time.monotonic() + SETUP_RETRY_SECONDS
        return False

    def _refresh_tokens(self) -> None:
        """Renew service-account tokens near their expiry while the pod runs (as the kubelet does)."""
        assert self.volumes is not None
        try:
            renewed = self.services.volumes.refresh_tokens(self.pod, self.volumes)
        except ApiError as e:
            self.log.warning("service account token renewal failed (%s); retrying on the next sync", e)
            return
        for token in renewed:
            self.log.info("renewed service account token %s (next renewal in %.0fs)", token.path,
                          token.refresh_at - time.time())

    def _refresh_volume_contents(self) -> None:
        """Rewrite secret/configMap/downwardAPI/projected volumes whose sources changed (as the
        kubelet does for a running pod; subPath mounts keep what they had)."""
        assert self.volumes is not None and self.ip is not None
        try:
            updated = self.services.volumes.refresh_contents(self.pod, self.volumes, self.ip)
        except Exception:  # never in the way of the containers; the files stay as they are
            self.log.exception("volume refresh failed; trying again in %.0fs", VOLUME_REFRESH_SECONDS)
            return
        for name in updated:
            self.log.info("volume %s updated: its source changed", name)

    def _resolve_image(self, st: ContainerState) -> None:
        image = str(st.spec.get("image") or "")
        try:
            st.runtime = self.services.images.resolve(image)
            self.services.images.materialize(st.runtime)
            st.image_error = ""
        except ImageNotAvailable as e:
            st.runtime = None
            st.image_error = str(e)
            st.image_error_since = time.monotonic()
            self.log.warning("container %s: %s", st.name, e)
            self.services.events.record(self.pod, events.WARNING, "Failed", f"Failed to pull image \"{image}\": {e}",
                                        self._field_path(st))
            self.services.events.record(self.pod, events.WARNING, "Failed", "Error: ErrImagePull", self._field_path(st))

    def _apply_spec_changes(self) -> None:
        """Pod specs are immutable except container images: a new image restarts the container."""
        spec = self.pod.get("spec") or {}
        current = {c["name"]: c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]}
        for st in [*self.init_states, *self.states]:
            new = current.get(st.name)
            if new is None or new.get("image") == st.spec.get("image"):
                continue
            self.log.info("container %s: image changed %s -> %s; restarting it", st.name, st.spec.get("image"),
                          new.get("image"))
            st.spec = dict(new)
            self._resolve_image(st)
            if st.init and st.done:
                continue
            st.replace_pending = True
            st.done = False
            st.terminated = None
            if st.run is not None:
                st.run.kill_message = "Container definition changed"
                self.services.events.record(self.pod, events.NORMAL, "Killing",
                                            f"Container {st.name} definition changed, will be restarted",
                                            self._field_path(st))
                st.run.process.terminate_in_background(self._grace_seconds())
            else:
                st.restart_at = 0.0

    # ----------------------------------------------------------------- containers

    def _drive_containers(self) -> None:
        for st in self.init_states:
            if st.done:
                continue
            self._drive(st)
            if not st.done:
                for other in self.states:
                    other.waiting = ("PodInitializing", "")
                return
            if st.terminated and st.terminated.exit_code != 0:
                return  # failed for good (restartPolicy Never): the pod fails
        for st in self.states:
            self._drive(st)

    def _drive(self, st: ContainerState) -> None:
        if st.run is not None:
            if not st.run.process.exited.is_set():
                return
            self._record_exit(st)
        if st.done:
            return
        if st.runtime is None:
            waited = time.monotonic() - st.image_error_since
            reason = "ErrImagePull" if waited < IMAGE_PULL_BACKOFF_AFTER_SECONDS else "ImagePullBackOff"
            message = st.image_error if reason == "ErrImagePull" else (
                f'Back-off pulling image "{st.spec.get("image")}": {st.image_error}')
            st.waiting = (reason, message)
            return
        now = time.monotonic()
        if now < st.restart_at:
            st.waiting = ("CrashLoopBackOff",
                          f"back-off {st.shown_backoff:g}s restarting failed container={st.name} "
                          f"pod={self.name}_{self.namespace}({self.uid})")
            return
        if now < st.config_retry_at:
            return
        self._start(st)

    def _start(self, st: ContainerState) -> None:
        assert st.runtime is not None
        try:
            spec, target = self._process_spec(st)
            probes = {kind: p for kind, p in (
                (STARTUP, parse_probe(STARTUP, st.spec.get("startupProbe"))),
                (LIVENESS, parse_probe(LIVENESS, st.spec.get("livenessProbe"))),
                (READINESS, parse_probe(READINESS, st.spec.get("readinessProbe"))),
            ) if p is not None and not st.init}
        except (ContainerConfigError, VolumeNotReady, InvalidProbe, ApiError) as e:
            if st.waiting != ("CreateContainerConfigError", str(e)):
                self.log.warning("container %s: cannot configure: %s", st.name, e)
                self.services.events.record(self.pod, events.WARNING, "Failed", f"Error: {e}", self._field_path(st))
            st.waiting = ("CreateContainerConfigError", str(e))
            st.config_retry_at = time.monotonic() + SETUP_RETRY_SECONDS
            return
        if st.has_run:
            st.restart_count += 1
        st.has_run = True
        st.replace_pending = False
        oom_kills = 0
        try:
            process: ContainerProcess
            if st.runtime.local is not None:
                if self.cgroups is not None:  # runc joins the container's groups (cgroupsPath), limits set here
                    self.cgroups.prepare(st.name, container_limits(st.spec))
                    oom_kills = self.cgroups.oom_kills(st.name)
                process = RuncProcess(spec, self.wake, self.services.settings.runc_root, self._runc_name(st))
            else:
                if self.cgroups is not None:
                    require_executable(spec)  # the wrapper shell would only exit 127
                    spec = replace(spec, argv=join_argv(self.cgroups.prepare(st.name, container_limits(st.spec)),
                                                        argv_as_user(spec)), user=None, group=None, extra_groups=None)
                    oom_kills = self.cgroups.oom_kills(st.name)
                process = ContainerProcess(spec, on_exit=self.wake)
            pid = process.start()
        except OSError as e:
            self.log.warning("container %s: cannot start %s: %s", st.name, spec.argv[:1], e)
            self.services.events.record(self.pod, events.WARNING, "Failed", f"Error: {e}", self._field_path(st))
            now = now_rfc3339()
            self._after_termination(st, Terminated(128, "StartError", now, now, message=str(e)), ran_seconds=0.0)
            return
        run = ContainerRun(process=process, probes=probes, oom_kills_at_start=oom_kills)
        st.run = run
        st.waiting = ("", "")
        self.log.info("container %s started: pid %d, %s (log %s)", st.name, pid, spec.argv, spec.log_path)
        self.services.events.record(self.pod, events.NORMAL, "Started", f"Started container {st.name}",
                                    self._field_path(st))
        if STARTUP not in probes:
            run.started.set()
        for probe in probes.values():
            ProbeLoop(probe, target, run.stop, run.started, functools.partial(self._on_probe, st, run),
                      f"{self.namespace}/{self.name}/{st.name}").start()
        post_start = ((st.spec.get("lifecycle") or {}).get("postStart") or {})
        if post_start:
            threading.Thread(target=self._run_hook, args=(st, "PostStart", post_start, target, POST_START_TIMEOUT_SECONDS),
                             daemon=True).start()

    def _record_exit(self, st: ContainerState) -> None:
        run = st.run
        assert run is not None
        run.stop.set()
        st.run = None
        code = run.process.exit_code if run.process.exit_code is not None else 137
        reason = "Completed" if code == 0 else "Error"
        if code == 137 and self.cgroups is not None and self.cgroups.oom_kills(st.name) > run.oom_kills_at_start:
            reason = "OOMKilled"  # as the real kubelet reports a container its memory limit ended
        message = run.kill_message
        if not message and code != 0 and st.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = termination_message_from_log(run.process.spec.log_path)
        term = Terminated(code, reason, run.process.started_at, run.process.finished_at, run.process.container_id,
                          message)
        self.log.info("container %s exited with %d%s", st.name, code, f" ({run.kill_message})" if run.kill_message else "")
        self._after_termination(st, term, time.monotonic() - run.began)

    def _after_termination(self, st: ContainerState, term: Terminated, ran_seconds: float) -> None:
        policy = (self.pod.get("spec") or {}).get("restartPolicy") or "Always"
        if st.replace_pending:
            restart, delay = True, 0.0
        else:
            if st.init:
                restart = term.exit_code != 0 and policy != "Never"
            else:
                restart = policy == "Always" or (policy == "OnFailure" and term.exit_code != 0)
            if ran_seconds >= BACKOFF_RESET_SECONDS:
                st.backoff_seconds = 0.0
            delay = st.backoff_seconds
        if not restart:
            st.terminated = term
            st.done = True
            return
        st.last_termination = term
        st.terminated = None
        st.restart_at = time.monotonic() + delay
        st.shown_backoff = delay
        if not st.replace_pending:
            st.backoff_seconds = (RESTART_BACKOFF_INITIAL_SECONDS if delay == 0
                                  else min(delay * 2, max_restart_backoff(self.pod)))
        if delay > 0:
            self.services.events.record(self.pod, events.WARNING, "BackOff",
                                        f"Back-off restarting failed container {st.name}", self._field_path(st))
        st.waiting = ("CrashLoopBackOff", "") if delay > 0 else ("ContainerCreating", "")

    def _on_probe(self, st: ContainerState, run: ContainerRun, kind: str, healthy: bool, message: str) -> None:
        with self.lock:
            if st.run is not run or run.stop.is_set():
                return
            if kind == READINESS:
                run.ready = healthy
            elif kind == STARTUP and healthy:
                run.started.set()
            if not healthy:
                self.log.info("container %s: %s probe failed: %s", st.name, kind, message)
                self.services.events.record(self.pod, events.WARNING, "Unhealthy",
                                            f"{kind.capitalize()} probe failed: {message}", self._field_path(st))
            if not healthy and kind in (LIVENESS, STARTUP):
                run.kill_message = f"{kind} probe failed"
                self.services.events.record(self.pod, events.NORMAL, "Killing",
                                            f"Container {st.name} failed {kind} probe, will be restarted",
                                            self._field_path(st))
                run.stop.set()
                run.process.terminate_in_background(self._grace_seconds())
        self.wake()

    def _run_hook(self, st: ContainerState, name: str, hook: dict[str, Any], target: ProbeTarget,
                  timeout: float) -> None:
        check: ExecCheck | HttpGetCheck
        if hook.get("exec"):
            check = ExecCheck(tuple(str(c) for c in hook["exec"].get("command") or []))
        elif hook.get("httpGet"):
            h = hook["httpGet"]
            check = HttpGetCheck(port=h.get("port") if isinstance(h.get("port"), int) else str(h.get("port")),
                                 path=h.get("path") or "/", scheme=(h.get("scheme") or "HTTP").upper(),
                                 host=h.get("host") or "")
        else:
            return
        result = run_check(check, target, timeout)
        if not result.success:
            self.log.warning("container %s: %s hook failed: %s", st.name, name, result.message)
            self.services.events.record(self.pod, events.WARNING, f"Failed{name}Hook",
                                        f"{name} hook failed: {result.message}", self._field_path(st))

    # ----------------------------------------------------------------- process spec

    def _process_spec(self, st: ContainerState, starting: bool = True) -> tuple[ProcessSpec, ProbeTarget]:
        """How to run `st`; `starting`: for a new start of the container (its subPath mounts of
        refreshed volumes take the files as they are now), else for a hook of the running one."""
        assert st.runtime is not None and self.volumes is not None and self.ip is not None
        settings = self.services.settings
        container = st.spec
        namespace = self.namespace
        service_env = {
            "KUBERNETES_SERVICE_HOST": settings.apiserver_host,
            "KUBERNETES_SERVICE_PORT": str(settings.apiserver_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(settings.apiserver_port),
            "KUBERNETES_PORT": f"tcp://{settings.apiserver_host}:{settings.apiserver_port}",
        }
        user_env = build_environment(
            self.pod, container, pod_ip=self.ip, host_ip=settings.host_ip, service_env=service_env,
            secret=lambda name: self._lookup("secrets", namespace, name),
            config_map=lambda name: self._lookup("configmaps", namespace, name),
        )
        mounts: list[tuple[str, str]] = []
        read_only: set[str] = set()  # mountPaths
        extra_env: dict[str, str] = {}
        for index, mount in enumerate(container.get("volumeMounts") or []):
            directory = self.volumes.directories.get(mount["name"])
            if directory is None:
                raise ContainerConfigError(f'volume "{mount["name"]}" is not defined in the pod')
            sub_path = mount.get("subPath") or expand(mount.get("subPathExpr") or "", user_env)
            host = directory / sub_path if sub_path else directory
            if sub_path and mount["name"] in self.volumes.contents:
                snapshot = pod_directory(settings, self.uid) / SUB_PATHS_DIR / mount["name"] / st.name / str(index)
                if starting or not snapshot.exists():
                    snapshot_sub_path(directory, sub_path, snapshot)
                host = snapshot
            elif sub_path and directory.is_dir() and not host.exists():
                host.mkdir(parents=True, exist_ok=True)
            mounts.append((mount["mountPath"], str(host)))
            if mount.get("readOnly"):
                read_only.add(mount["mountPath"])
            extra_env[VOLUME_ENV_PREFIX + _env_suffix(mount["name"])] = str(directory)
            if mount["mountPath"].rstrip("/") == SERVICE_ACCOUNT_MOUNT_PATH:
                extra_env[SERVICE_ACCOUNT_DIR_ENV] = str(host)
        host_network = bool((self.pod.get("spec") or {}).get("hostNetwork"))
        if st.runtime.local is not None:
            return self._runc_spec(st, user_env, service_env, mounts, read_only, host_network)
        rewriter = Rewriter(paths=(*mounts, *st.runtime.rewrites), pod_ip="" if host_network else self.ip)
        argv = container_argv(st.runtime, [str(c) for c in container.get("command") or []],
                              [str(a) for a in container.get("args") or []])
        argv = [rewriter.apply(expand(a, user_env)) for a in argv]
        if not argv:
            raise ContainerConfigError("no command specified")
        container_dir = pod_directory(settings, self.uid) / "containers" / st.name
        hostname = ((self.pod.get("spec") or {}).get("hostname") or self.name)[:63]
        env = {"PATH": st.runtime.path, "HOME": str(container_dir), "HOSTNAME": hostname, POD_IP_ENV: self.ip,
               **dict(st.runtime.env)}
        env.update({k: rewriter.apply(v) for k, v in user_env.items()})
        env.update(extra_env)
        cwd = container_dir
        if container.get("workingDir"):
            wanted = Path(rewriter.apply(container["workingDir"]))
            if wanted.is_dir() or rewriter.host_path(container["workingDir"]):
                cwd = wanted
            else:
                self.log.warning("container %s: workingDir %s is not a volume; using %s", st.name,
                                 container["workingDir"], container_dir)
        log_path = (settings.logs_dir / f"{self.namespace}_{self.name}_{self.uid}" / st.name
                    / f"{st.restart_count + (1 if st.has_run else 0)}.log")
        pid_file = settings.pids_dir / f"{self.uid}_{st.name}.pid"
        ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name")}
        inside_pod = Rewriter(paths=rewriter.paths, pod_ip=rewriter.pod_ip, loopback=True)
        target = ProbeTarget(pod_ip=self.ip, ports=ports, env=env, cwd=cwd, rewrite=inside_pod.apply)
        process = ProcessSpec(argv=argv, env=env, cwd=cwd, log_path=log_path, pid_file=pid_file)
        if self._shares_files_with_runc():
            # Its files meet those of a container that runs as its real user: this one does too
            # (a process stands in for an image with no user of its own: root unless the pod says).
            uid, gid, groups = self._container_user(st, 0, 0)
            self._open_empty_dirs()
            container_dir.mkdir(parents=True, exist_ok=True)
            os.chown(container_dir, uid, gid)
            process = replace(process, user=uid, group=gid, extra_groups=groups)
        return process, target

    def _runc_name(self, st: ContainerState) -> str:
        """The container's name for runc and its root filesystem's for buildah (per pod container)."""
        return f"{self.uid}-{st.name}"

    def _container_user(self, st: ContainerState, image_uid: int, image_gid: int) -> tuple[int, int, tuple[int, ...]]:
        """(uid, gid, supplementary groups) the container runs as: runAsUser/runAsGroup of the
        container or the pod, else the image's; fsGroup and supplementalGroups besides."""
        pod_security = (self.pod.get("spec") or {}).get("securityContext") or {}
        security = st.spec.get("securityContext") or {}
        uid = int(security.get("runAsUser", pod_security.get("runAsUser", image_uid)))
        gid = int(security.get("runAsGroup", pod_security.get("runAsGroup", image_gid)))
        groups = tuple(int(g) for g in [pod_security.get("fsGroup"), *(pod_security.get("supplementalGroups") or [])]
                       if g is not None)
        if uid == 0 and (security.get("runAsNonRoot") or pod_security.get("runAsNonRoot")):
            raise ContainerConfigError("container has runAsNonRoot and image will run as root")
        return uid, gid, groups

    def _open_empty_dirs(self) -> None:
        """Like the real kubelet: emptyDirs are world-writable, whichever user the container runs as."""
        for volume in (self.pod.get("spec") or {}).get("volumes") or []:
            directory = self.volumes.directories.get(volume["name"]) if self.volumes else None
            if "emptyDir" in volume and directory is not None and directory.is_dir():
                directory.chmod(0o777)

    def _shares_files_with_runc(self) -> bool:
        """Does a container of this pod run in runc (an image of the local store), as its own user?"""
        spec = self.pod.get("spec") or {}
        return any(is_local_image(str(c.get("image") or ""))
                   for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])])

    def _runc_spec(self, st: ContainerState, user_env: dict[str, str], service_env: dict[str, str],
                   mounts: list[tuple[str, str]], read_only: set[str],
                   host_network: bool) -> tuple[ProcessSpec, ProbeTarget]:
        """`runc run` of a local image's container (runc.py): the volumes bind-mounted at their
        mountPaths (no path rewriting), the image's or the securityContext's user, its own root."""
        assert st.runtime is not None and st.runtime.local is not None and self.ip is not None
        settings = self.services.settings
        if self.services.local_images is None:
            raise ContainerConfigError("this kubelet runs no local images")
        name = self._runc_name(st)
        try:
            rootfs = self.services.local_images.mount(st.runtime.local, name)
            image_uid, image_gid = parse_user(str(st.runtime.local.config.get("User") or ""),
                                              _read(rootfs / "etc" / "passwd"), _read(rootfs / "etc" / "group"))
        except LocalImageError as e:
            raise ContainerConfigError(str(e)) from e
        security = st.spec.get("securityContext") or {}
        uid, gid, groups = self._container_user(st, image_uid, image_gid)
        self._open_empty_dirs()
        rewriter = Rewriter(paths=(), pod_ip="" if host_network else self.ip)
        argv = container_argv(st.runtime, [str(c) for c in st.spec.get("command") or []],
                              [str(a) for a in st.spec.get("args") or []])
        argv = [rewriter.apply(expand(a, user_env)) for a in argv]
        if not argv:
            raise ContainerConfigError("no command specified")
        hostname = ((self.pod.get("spec") or {}).get("hostname") or self.name)[:63]
        env = {**dict(st.runtime.env), "HOSTNAME": hostname, POD_IP_ENV: self.ip, **service_env}
        env.update({k: rewriter.apply(v) for k, v in user_env.items()})
        for mount in st.spec.get("volumeMounts") or []:
            env.setdefault(VOLUME_ENV_PREFIX + _env_suffix(mount["name"]), mount["mountPath"])
            if mount["mountPath"].rstrip("/") == SERVICE_ACCOUNT_MOUNT_PATH:
                env[SERVICE_ACCOUNT_DIR_ENV] = SERVICE_ACCOUNT_MOUNT_PATH
        own = {path for path, _ in mounts}
        name_mounts = [Mount(path, str(host), read_only=True) for path, host in
                       (("/etc/hosts", str(settings.hosts_file)), ("/etc/resolv.conf", "/etc/resolv.conf"))
                       if path not in own and Path(host).exists()]
        dropped = {str(c).upper() for c in (security.get("capabilities") or {}).get("drop") or []}
        added = {f"CAP_{str(c).upper()}" for c in (security.get("capabilities") or {}).get("add") or []}
        capabilities = tuple(c for c in DEFAULT_CAPABILITIES if "ALL" not in dropped and c[4:] not in dropped)
        config = ContainerConfig(
            args=argv, env=env,
            cwd=str(st.spec.get("workingDir") or st.runtime.local.config.get("WorkingDir") or "/"),
            rootfs=rootfs, uid=uid, gid=gid, additional_gids=groups,
            read_only_root=bool(security.get("readOnlyRootFilesystem")),
            mounts=(*name_mounts, *(Mount(path, host, read_only=path in read_only) for path, host in mounts)),
            hostname=hostname, capabilities=(*capabilities, *sorted(added - set(capabilities))),
            no_new_privileges=security.get("allowPrivilegeEscalation") is False,
            cgroups_path=f"{self.cgroups.net_path}/{st.name}" if self.cgroups is not None else "",
        )
        container_dir = pod_directory(settings, self.uid) / "containers" / st.name
        bundle = write_bundle(container_dir / "bundle", config)
        log_path = (settings.logs_dir / f"{self.namespace}_{self.name}_{self.uid}" / st.name
                    / f"{st.restart_count + (1 if st.has_run else 0)}.log")
        pid_file = settings.pids_dir / f"{self.uid}_{st.name}.pid"
        argv = RuncProcess.command(settings.runc_root, bundle, name, container_dir / "container.pid")
        ports = {p["name"]: int(p["containerPort"]) for p in st.spec.get("ports") or [] if p.get("name")}
        inside_pod = Rewriter(paths=(), pod_ip=rewriter.pod_ip, loopback=True)
        target = ProbeTarget(pod_ip=self.ip, ports=ports, env=dict(os.environ), cwd=container_dir,
                             rewrite=inside_pod.apply, exec_prefix=tuple(runc_argv(settings.runc_root, "exec", name)))
        return ProcessSpec(argv=argv, env=dict(os.environ), cwd=container_dir, log_path=log_path,
                           pid_file=pid_file), target

    def _lookup(self, plural: str, namespace: str, name: str) -> dict[str, str] | None:
        try:
            obj = self.services.api.get(object_path("", "v1", plural, namespace, name))
        except NotFound:
            return None
        raw = decode_secret(obj) if plural == "secrets" else decode_config_map(obj)
        return {k: v.decode("utf-8", errors="replace") for k, v in raw.items()}

    # ----------------------------------------------------------------- status

    def _build_status(self) -> dict[str, Any]:
        settings = self.services.settings
        restart_policy = (self.pod.get("spec") or {}).get("restartPolicy") or "Always"
        init_failed = any(st.done and st.terminated is not None and st.terminated.exit_code != 0
                          for st in self.init_states)
        initialized = all(st.done for st in self.init_states) and not init_failed
        phase = self._phase(restart_policy, initialized, init_failed)
        ready_names = [st.name for st in self.states if st.run is not None and st.run.is_ready]
        unready = [st.name for st in self.states if st.name not in ready_names]
        incomplete = [st.name for st in self.init_states if not st.done or init_failed]
        conditions = [("PodScheduled", True, "", "")]
        conditions.append(("Initialized", initialized, "" if initialized else "ContainersNotInitialized",
                           "" if initialized else f"containers with incomplete status: [{' '.join(incomplete)}]"))
        if phase in TERMINAL_PHASES:
            containers_ready = (False, "PodCompleted", "")
        elif unready:
            containers_ready = (False, "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        else:
            containers_ready = (True, "", "")
        conditions.append(("ContainersReady", *containers_ready))
        conditions.append(("Ready", *containers_ready))
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": [self._condition(*c) for c in conditions],
            "hostIP": settings.host_ip,
            "hostIPs": [{"ip": settings.host_ip}],
            "startTime": self.start_time,
        }
        if self.ip:
            status["podIP"] = self.ip
            status["podIPs"] = [{"ip": self.ip}]
        if self.init_states:
            status["initContainerStatuses"] = [self._container_status(st) for st in self.init_states]
        status["containerStatuses"] = [self._container_status(st) for st in self.states]
        return status

    def _phase(self, restart_policy: str, initialized: bool, init_failed: bool) -> str:
        views = [ContainerView(running=st.run is not None,
                               exit_code=st.terminated.exit_code if st.terminated is not None else None,
                               restarting=st.run is None and st.terminated is None and st.last_termination is not None)
                 for st in self.states]
        return pod_phase(restart_policy, initialized=initialized, init_failed=init_failed, containers=views)

    def _condition(self, kind: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
        value = "True" if ok else "False"
        previous = self.transitions.get(kind)
        if previous is None or previous[0] != value:
            previous = (value, now_rfc3339())
            self.transitions[kind] = previous
        # None clears a reason/message left from before: the status is a strategic-merge patch.
        return {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": previous[1],
                "reason": reason or None, "message": message or None}

    def _container_status(self, st: ContainerState) -> dict[str, Any]:
        run = st.run
        status: dict[str, Any] = {
            "name": st.name, "image": st.spec.get("image", ""),
            "imageID": st.runtime.image_id if st.runtime else "",
            "restartCount": st.restart_count,
            "ready": bool(run is not None and run.is_ready) or bool(st.init and st.done and st.terminated
                                                                    and st.terminated.exit_code == 0),
            "started": bool(run is not None and run.process.running() and run.started.is_set()),
            "lastState": st.last_termination.as_state() if st.last_termination else {},
        }
        if run is not None:
            status["state"] = {"running": {"startedAt": run.process.started_at}}
            status["containerID"] = run.process.container_id
        elif st.terminated is not None:
            status["state"] = st.terminated.as_state()
            if st.terminated.container_id:
                status["containerID"] = st.terminated.container_id
        else:
            reason, message = st.waiting
            waiting: dict[str, Any] = {"reason": reason or "ContainerCreating"}
            if message or (reason in ("", "ContainerCreating") and self.setup_message):
                waiting["message"] = message or self.setup_message
            status["state"] = {"waiting": waiting}
        return status

    def _publish(self, status: dict[str, Any]) -> None:
        if status == self.last_status or self.services.node_down.is_set():
            return
        try:
            self.services.api.patch(pod_path(self.namespace, self.name, "status"),
                                    {"metadata": {"uid": self.uid}, "status": status})
        except (NotFound, Conflict):
            self.log.info("pod is gone; stopping its containers")
            self.mark_deleted()
            return
        except ApiError as e:
            self.log.warning("status update failed (%s); retrying on the next sync", e)
            return
        self.last_status = status
        if status["phase"] in TERMINAL_PHASES and not self.terminal:
            with self.lock:
                self.terminal = True
                for st in [*self.init_states, *self.states]:
                    if st.run is not None:
                        st.run.stop.set()
            self.services.ipam.release(self.uid)
            self.log.info("pod %s; its address %s is free again", status["phase"], self.ip)

    # ----------------------------------------------------------------- termination

    def _grace_seconds(self) -> float:
        metadata = self.pod.get("metadata") or {}
        spec = self.pod.get("spec") or {}
        for value in (metadata.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
            if value is not None:
                return float(value)
        return float(DEFAULT_GRACE_SECONDS)

    def _live_runs(self) -> list[tuple[ContainerState, ContainerRun]]:
        with self.lock:
            return [(st, st.run) for st in [*self.init_states, *self.states]
                    if st.run is not None and st.run.process.running()]

    def _terminate_gracefully(self) -> None:
        grace = self._grace_seconds()
        deadline = time.monotonic() + grace
        runs = self._live_runs()
        if runs:
            self.log.info("pod deleted: stopping %d containers (grace period %.0fs)", len(runs), grace)
        hooks = []
        for st, run in runs:
            run.stop.set()
            self.services.events.record(self.pod, events.NORMAL, "Killing", f"Stopping container {st.name}",
                                        self._field_path(st))
            pre_stop = (st.spec.get("lifecycle") or {}).get("preStop") or {}
            if pre_stop and self.volumes is not None:
                try:
                    _, target = self._process_spec(st, starting=False)
                except Exception as e:  # the hook is best effort; termination goes on
                    self.log.warning("container %s: preStop hook not run: %s", st.name, e)
                    continue
                hook = threading.Thread(target=self._run_hook, args=(st, "PreStop", pre_stop, target, grace),
                                        daemon=True)
                hook.start()
                hooks.append(hook)
        for hook in hooks:
            hook.join(max(deadline - time.monotonic(), 0.0))
        terminators = [threading.Thread(target=run.process.terminate,
                                        args=(max(deadline - time.monotonic(), 0.0), self.services.stop), daemon=True)
                       for _, run in runs]
        for t in terminators:
            t.start()
        for t in terminators:
            t.join()

    def _kill_everything(self, grace_seconds: float) -> None:
        runs = self._live_runs()
        for _, run in runs:
            run.stop.set()
        threads = [threading.Thread(target=run.process.terminate, args=(grace_seconds,), daemon=True)
                   for _, run in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _delete_object(self) -> bool:
        """The final delete once every container has stopped; False if it must be retried."""
        try:
            self.services.api.delete(pod_path(self.namespace, self.name),
                                     {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}})
            self.log.info("pod terminated and deleted")
        except (NotFound, Conflict):
            pass  # gone already, or replaced by a new pod of the same name
        except ApiError as e:
            self.log.warning("final delete failed (%s); retrying in %.0fs", e, SYNC_SECONDS)
            return False
        return True

    def _cleanup(self) -> None:
        if self.cgroups is not None:
            if self.services.partitions is not None:
                self.services.partitions.forget_pod(self.uid)  # no rule may name a removed cgroup
            self.cgroups.remove()
        if self.services.local_images is not None:
            for st in [*self.init_states, *self.states]:
                if st.runtime is not None and st.runtime.local is not None:
                    self.services.local_images.remove(self._runc_name(st))
        self.services.volumes.cleanup(self.uid)
        self.services.ipam.release(self.uid)
        for st in [*self.init_states, *self.states]:
            (self.services.settings.pids_dir / f"{self.uid}_{st.name}.pid").unlink(missing_ok=True)
        self.services.on_worker_done(self.uid)

    # ----------------------------------------------------------------- faults and shutdown

    def process_of(self, container: str) -> ContainerProcess | None:
        with self.lock:
            for st in [*self.init_states, *self.states]:
                if st.name == container and st.run is not None and st.run.process.running():
                    return st.run.process
        return None

    def node_stopped(self) -> None:
        """The node went down: every process dies at once, as in a power cut. The pod object is left
        alone; the node-lifecycle controller marks it not ready once the node's heartbeats stop."""
        with self.lock:
            for st in [*self.init_states, *self.states]:
                st.backoff_seconds = 0.0
                if st.run is not None:
                    st.run.stop.set()
                    st.run.kill_message = "node stopped"
            runs = [st.run for st in [*self.init_states, *self.states] if st.run is not None]
            self.last_status = None
        for run in runs:
            run.process.kill()

    def shutdown(self, grace_seconds: float) -> None:
        """Kubelet stop: end the processes but keep the pod's volumes and address for the next run."""
        self._kill_everything(grace_seconds)
        self.wake()

    @staticmethod
    def _field_path(st: ContainerState) -> str:
        return f"spec.{'initContainers' if st.init else 'containers'}{{{st.name}}}"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _env_suffix(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name).upper()

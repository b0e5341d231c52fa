"""Why a member pod does not start, in the pod's own words: the scheduler finding no node for it
(Unschedulable: a nodeSelector no node matches, a taint not tolerated, anti-affinity with too few
nodes), the waiting reason of its etcd container or of an init container (a seed pod's
restore-fetch, restore-snapshot; ErrImagePull, ImagePullBackOff, CrashLoopBackOff with the last
exit code and termination message, CreateContainerConfigError, ...) or a FailedMount event about
it (a secret volume that cannot be set up). Two are told in the operator's words: a member restarting
on its volume that etcd refuses to start because its data is gone (MemberDataMissing,
planning/member_pods.py), and a deleted member pod that does not go past its grace period (StuckTerminating: a
finalizer, a node that does not answer; planning/member_pods.py). Pure: the status, its
MemberStartBlocked condition and the supervisor's one Warning event per incident are built from
`start_problems`."""
from __future__ import annotations

from dataclasses import dataclass

from etcd_operator.observed import (
    IMAGE_PULL_FAILURE_REASONS,
    ObservedCluster,
    ObservedPod,
    WaitingInitContainer,
    format_timestamp,
    stuck_terminating_seconds,
    what_holds,
)

FAILED_MOUNT = "FailedMount"
UNSCHEDULABLE = "Unschedulable"
# A pod's first scheduling attempt may fail for a moment (its claim not bound yet, a node just
# starting): reported only once the pod is this old.
UNSCHEDULABLE_GRACE_SECONDS = 5.0
CRASH_LOOP = "CrashLoopBackOff"
OOM_KILLED = "OOMKilled"  # how a kubelet reports a container its memory limit ended
# Waiting reasons after which the container does not run until something changes.
CONTAINER_START_FAILURES = IMAGE_PULL_FAILURE_REASONS | {
    CRASH_LOOP, "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
}
# Waiting reasons of a pod whose volumes may be what holds it up.
SETTING_UP = frozenset({"ContainerCreating", "PodInitializing"})
MAX_DETAIL_CHARS = 400
MEMBER_DATA_MISSING = "MemberDataMissing"
STUCK_TERMINATING = "StuckTerminating"
# What etcd says when a member started with only itself in --initial-cluster finds no data (no
# WAL), so looks for peers to join through and has none (3.4 to 3.6 alike).
NO_PEERS_TO_JOIN = ("cannot fetch cluster info from peer urls", "could not retrieve cluster information")


@dataclass(frozen=True)
class StartProblem:
    pod: str
    reason: str  # the pod's own reason
    message: str

    @property
    def incident(self) -> tuple[str, str]:
        """What stays the same while the cause does: ErrImagePull turning into ImagePullBackOff
        (or a crash loop's back-off growing) is one incident, not several."""
        kind = "image" if self.reason in IMAGE_PULL_FAILURE_REASONS else self.reason
        return self.pod, kind

    def describe(self) -> str:
        verb = "is stuck terminating" if self.reason == STUCK_TERMINATING else "does not start"
        return f"member pod {self.pod} {verb}: {self.reason}: {self.message}" if self.message else \
            f"member pod {self.pod} {verb}: {self.reason}"


def start_problems(observed: ObservedCluster) -> tuple[StartProblem, ...]:
    problems: list[StartProblem] = []
    for pod in sorted(observed.pods, key=lambda p: p.name):
        if pod.deleting:
            problem = _stuck_terminating(pod, observed)
        else:
            problem = _start_problem(pod, observed.mount_failures.get(pod.name), observed.pod_age_seconds(pod))
        if problem is not None:
            problems.append(problem)
    return tuple(problems)


def _stuck_terminating(pod: ObservedPod, observed: ObservedCluster) -> StartProblem | None:
    past = stuck_terminating_seconds(pod, observed)
    if past is None or pod.member_name not in observed.member_names:
        return None
    # Times, not durations: the message stays the same pass after pass (calm status and pacing).
    ended = format_timestamp(pod.deletion_deadline) if pod.deletion_deadline is not None else "?"
    return StartProblem(pod.name, STUCK_TERMINATING,
                        _clip(f"deleted, still there after its grace period ended at {ended}, "
                              f"{what_holds(pod)}; its member cannot restart until it is gone"))


def _start_problem(pod: ObservedPod, mount_failure: str | None, age_seconds: float | None) -> StartProblem | None:
    if pod.terminal:
        return None
    if pod.unschedulable:
        if age_seconds is not None and age_seconds < UNSCHEDULABLE_GRACE_SECONDS:
            return None
        return StartProblem(pod.name, UNSCHEDULABLE, _clip(pod.unschedulable_message or ""))
    init = pod.waiting_init
    if init is not None and init.reason in CONTAINER_START_FAILURES:
        return StartProblem(pod.name, init.reason, _init_container_detail(init))
    reason = pod.waiting_reason
    if reason == CRASH_LOOP and pod.rejoins_on_data and _says(pod.last_termination_message, NO_PEERS_TO_JOIN):
        return StartProblem(pod.name, MEMBER_DATA_MISSING, _clip(
            "its member ran before, but etcd finds no data on its volume (data directory gone, or the volume "
            "recreated empty) and refuses to rejoin without it; the member is replaced like an unhealthy one, "
            f"its volume is left as it is ({_last_termination(pod)})"))
    if reason == CRASH_LOOP:
        return StartProblem(pod.name, reason, _last_termination(pod))
    if reason in CONTAINER_START_FAILURES:
        return StartProblem(pod.name, reason, _clip(pod.waiting_message or ""))
    if reason is None and _between_crashes(pod):
        # The kubelet restarted it after its back-off: still the same crash loop (one incident),
        # not a start problem gone for the second it runs.
        return StartProblem(pod.name, CRASH_LOOP, _last_termination(pod))
    if mount_failure and (reason is None or reason in SETTING_UP) and pod.phase == "Pending":
        return StartProblem(pod.name, FAILED_MOUNT, _clip(mount_failure))
    return None


# Restarts after which a container that exited with an error and is not ready is taken to be
# crash looping still while it runs again (one restart is a crash, not a loop).
CRASH_LOOP_RESTARTS = 2


def _between_crashes(pod: ObservedPod) -> bool:
    return (not pod.ready and pod.restart_count >= CRASH_LOOP_RESTARTS
            and pod.last_exit_code is not None and pod.last_exit_code != 0)


def _says(text: str | None, phrases: tuple[str, ...]) -> bool:
    lowered = (text or "").lower()
    return any(phrase in lowered for phrase in phrases)


def _last_termination(pod: ObservedPod) -> str:
    """`etcd exited with code 1 (Error): <the end of its termination message>`."""
    parts = []
    if pod.last_exit_code is not None:
        parts.append(f"etcd exited with code {pod.last_exit_code}")
    if pod.last_termination_reason:
        parts.append(f"({pod.last_termination_reason})")
    head = " ".join(parts) or "etcd exited"
    advice = "; it needs more memory than its limit (spec.pod.resources.limits.memory) allows" \
        if pod.last_termination_reason == OOM_KILLED else ""
    lines = [line.strip() for line in (pod.last_termination_message or "").splitlines() if line.strip()]
    if not lines:
        return _clip(head + advice)
    # Only etcd's own line is clipped: the advice after it always reaches the reader.
    room = max(0, MAX_DETAIL_CHARS - len(head) - len(": ") - len(advice))
    return f"{head}: {_clip(lines[-1], room)}{advice}"


def _init_container_detail(init: WaitingInitContainer) -> str:
    """`init container restore-snapshot exited with code 128: <the end of its termination message>`,
    or its waiting message (an image it cannot pull)."""
    if init.reason != CRASH_LOOP:
        return _clip(f"init container {init.name}: {init.message}" if init.message else f"init container {init.name}")
    text = f"init container {init.name} exited" + (
        f" with code {init.last_exit_code}" if init.last_exit_code is not None else "")
    lines = [line.strip() for line in init.last_termination_message.splitlines() if line.strip()]
    return _clip(f"{text}: {lines[-1]}" if lines else text)


def _clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."

"""The operator killed just before and just after each of its effects (etcd_operator/failpoints.py)
during a 3 -> 5 -> 3 resize and a 3.5 -> 3.6 rolling upgrade, while a client keeps writing: each
armed failpoint fires once (the operator exits with FAILPOINT_EXIT_CODE and its container
restarts), and the cluster still converges to its spec with no unstarted, extra or learner member,
no leftover pod, and every acknowledged write readable.

One test per side (`before`, `after`) keeps the run short: one cluster, armed with every failpoint
of that side at once. Each fires once per operator pod (the fired file on its /tmp emptyDir), at
its first occurrence, so the kills come one after another: e.g. `before:member-add` kills the
first add, the restarted operator adds the member and dies at `before:pod-create`, the next one
creates the pod and dies at `before:promote`, and so on. The upgrade runs on a fresh operator pod,
so every failpoint is armed again.

Then a kube-apiserver restart during a resize. (A stopped node: test_placement_and_nodes.py;
frozen members, partitions, memory and disk faults: test_member_faults.py; both also marked
failure_injection.)"""
from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from etcd_operator import failpoints as fp
from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.kubelet.pods import MAX_RESTART_BACKOFF_ANNOTATION
from kube_sandbox.testing import Sandbox, wait_for
from operator_runtime.running import EXIT_LOST_LEADERSHIP
from tests.integration.etcd_operator.convergence import (
    assert_no_write_lost,
    drive,
    wait_converged,
    writing,
)
from tests.integration.etcd_operator.operator_clusters import DEFAULT_VERSION, Clusters, etcd_cluster
from tests.integration.etcd_operator.operator_deployment import (
    deploy_operator,
    deploy_operator_with_env,
    forbidden_lines,
    operator_container_status,
    operator_logs,
    operator_pod_logs,
    running_operator_pod,
    wait_operator_leading,
)

pytestmark = [pytest.mark.failure_injection, pytest.mark.alone]

OLD, NEW = newest_etcd_version("3.5"), newest_etcd_version("3.6")
FIRED_FILE = "/tmp/failpoints-fired"  # on the operator pod's /tmp emptyDir: survives container restarts
# Effects a resize goes through (it removes followers only, so leadership never moves); an
# upgrade of emptyDir members adds a new member, promotes it, removes an old one, and moves
# leadership off the old leader before removing it last.
# A resize adds learners and promotes them, then stops members (drain, pod delete) and removes them.
RESIZE_EFFECTS = (fp.MEMBER_ADD, fp.POD_CREATE, fp.PROMOTE, fp.MEMBER_REMOVE, fp.POD_DELETE, fp.DRAIN)
# A version change alone is made in place: drain, image change, per member.
IN_PLACE_EFFECTS = (fp.DRAIN, fp.IMAGE_CHANGE)
# A version and spec.pod change on emptyDir replaces each member: add, then stop and remove the old.
# (MoveLeader is no longer part of these: a leader stopping hands over itself.)
REPLACE_EFFECTS = RESIZE_EFFECTS
RESTART_BACKOFF_SECONDS = 2
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


@pytest.fixture
def apiserver_restarts() -> list[tuple[str, str]]:
    """(from, to) log timestamps of kube-apiserver restarts a test made: until the restarted
    apiserver is ready, it may answer 403 (its RBAC authorizer is not primed yet)."""
    return []


@pytest.fixture
def clusters(operator: Sandbox, namespace: str, apiserver_restarts: list[tuple[str, str]]) -> Iterator[Clusters]:
    """As conftest's, plus: the operator is put back to its plain manifest (no failpoints) after
    the test, whatever happened. The operator restarts here, so Forbidden lines are compared as
    sets (its log starts over); those logged while a restarted apiserver was not ready are expected."""
    before = set(forbidden_lines(operator_logs(operator)))
    try:
        yield Clusters(operator, namespace)
    finally:
        deploy_operator(operator)
        wait_operator_leading(operator)
    new = [line for line in forbidden_lines(operator_logs(operator)) if line not in before
           and not any(start <= line[:len(start)] <= end for start, end in apiserver_restarts)]
    assert not new, "operator made forbidden requests:\n" + "\n".join(new[-5:])


def _log_timestamp() -> str:
    """Now, as the operator's log lines begin (UTC, milliseconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _arm(sandbox: Sandbox, namespace: str, failpoints: set[str]) -> None:
    """A fresh operator pod with `failpoints` armed for clusters of `namespace` only."""
    deploy_operator_with_env(sandbox, {
        fp.FAILPOINTS_ENV: ",".join(sorted(failpoints)),
        fp.NAMESPACE_ENV: namespace,
        fp.FIRED_FILE_ENV: FIRED_FILE,
    }, revision=f"r{secrets.token_hex(4)}",  # a letter first: kubectl's YAML reads "01283e11" as a number
        # It exits at each failpoint on purpose: restarts 1-2 s apart, not the back-off's 30 s.
        pod_annotations={MAX_RESTART_BACKOFF_ANNOTATION: str(RESTART_BACKOFF_SECONDS)})
    pod = running_operator_pod(sandbox).metadata.name
    armed = ", ".join(sorted(failpoints))

    def leading_armed() -> bool:
        log = operator_pod_logs(sandbox, pod)
        return "became leader" in log and f"failpoints armed (testing only; the operator exits at each): {armed};" in log
    wait_for(leading_armed, timeout=120, what=f"operator pod {pod} leading with failpoints {armed} armed")
    assert "already fired: none" in operator_pod_logs(sandbox, pod), "a fresh operator pod has nothing fired yet"


def _assert_fired(sandbox: Sandbox, expected: set[str]) -> str:
    """Every armed failpoint fired exactly once and nothing else killed the operator: the container
    restarted once per failpoint, last with FAILPOINT_EXIT_CODE after logging which one fired, and
    the current container's start-up line lists them all as fired (from the fired file)."""
    pod = running_operator_pod(sandbox)
    status = operator_container_status(pod)
    log = operator_pod_logs(sandbox, pod.metadata.name)
    lines = re.findall(r"already fired: (.*)$", log, re.MULTILINE)
    assert lines, f"no failpoint start-up line in the operator's log:\n{log[-2000:]}"
    fired = {name.strip() for name in lines[-1].split(",")} - {"none"}
    hint = ""
    if fired < expected and all(fp.MOVE_LEADER in name for name in expected - fired):
        hint = ("; only move-leader did not fire: was the last outdated member no longer the leader "
                "(an etcd election of its own)? see the etcd members' logs")
    assert fired == expected, f"fired {sorted(fired)}, armed {sorted(expected)}{hint}"
    assert status.restart_count == len(expected), (
        f"{status.restart_count} operator restarts for {len(expected)} failpoints: something else killed it")
    terminated = status.last_state.terminated
    assert terminated is not None and terminated.exit_code == fp.FAILPOINT_EXIT_CODE, status.last_state
    previous = operator_pod_logs(sandbox, pod.metadata.name, previous=True)
    last = re.findall(r"failpoint (\S+) fired", previous)
    assert last and last[-1] in expected, f"the killed operator's log names no failpoint:\n{previous[-2000:]}"
    return f"fired {', '.join(sorted(fired))} ({status.restart_count} restarts, last exit {terminated.exit_code})"


@pytest.mark.parametrize("when", fp.WHENS)
def test_operator_killed_at_each_failpoint_of_a_resize_and_an_upgrade(clusters: Clusters, when: fp.When) -> None:
    sandbox, name = clusters.sandbox, "chaos"
    clusters.create(etcd_cluster(name, size=3, version=OLD))
    clusters.wait_running(name, ready=3, timeout=240)
    report: list[str] = []
    with writing(clusters, name) as writer:
        resize = {fp.failpoint_name(when, e) for e in RESIZE_EFFECTS}
        _arm(sandbox, clusters.namespace, resize)
        drive(clusters, name, writer, {"size": 5}, 5, OLD)
        drive(clusters, name, writer, {"size": 3}, 3, OLD)
        report.append(f"resize 3->5->3: {_assert_fired(sandbox, resize)}")

        in_place = {fp.failpoint_name(when, e) for e in IN_PLACE_EFFECTS}
        _arm(sandbox, clusters.namespace, in_place)
        drive(clusters, name, writer, {"version": NEW}, 3, NEW)
        report.append(f"upgrade {OLD}->{NEW} in place: {_assert_fired(sandbox, in_place)}")

        replace = {fp.failpoint_name(when, e) for e in REPLACE_EFFECTS}
        _arm(sandbox, clusters.namespace, replace)
        drive(clusters, name, writer, {"pod": {"annotations": {"chaos/revision": "1"}}}, 3, NEW)
        report.append(f"spec.pod change (members replaced): {_assert_fired(sandbox, replace)}")
    print(f"{when}: " + "; ".join(report))
    assert_no_write_lost(clusters, name, writer)


def test_operator_killed_before_and_after_each_effect_of_an_upgrade_on_volumes(clusters: Clusters) -> None:
    """Members on PVCs upgrade in place (the image changed in the running pod), and restart on their
    volumes for a spec.pod change (delete the pod, recreate it; the leader last): the operator killed
    before and after each of those effects, still the same members afterwards, each with its own
    PVC and nothing left over."""
    sandbox, name = clusters.sandbox, "chaosvol"
    clusters.create(etcd_cluster(name, size=3, version=OLD, pod={"persistentVolumeClaimSpec": PVC_SPEC}))
    clusters.wait_running(name, ready=3, timeout=240)
    ids = {m["name"]: m["ID"] for m in clusters.member_list(name)}
    in_place = {fp.failpoint_name(w, e) for w in fp.WHENS for e in IN_PLACE_EFFECTS}
    restart = {fp.failpoint_name(w, e) for w in fp.WHENS for e in (fp.POD_DELETE, fp.POD_CREATE, fp.DRAIN)}
    with writing(clusters, name) as writer:
        _arm(sandbox, clusters.namespace, in_place)
        drive(clusters, name, writer, {"version": NEW}, 3, NEW)
        print(f"upgrade on volumes {OLD}->{NEW} in place: {_assert_fired(sandbox, in_place)}")
        _arm(sandbox, clusters.namespace, restart)
        drive(clusters, name, writer, {"pod": {"persistentVolumeClaimSpec": PVC_SPEC,
                                                "annotations": {"chaos/revision": "1"}}}, 3, NEW)
        print(f"spec.pod change on volumes (restarts): {_assert_fired(sandbox, restart)}")
    assert {m["name"]: m["ID"] for m in clusters.member_list(name)} == ids, "members were replaced, not upgraded in place"
    pvcs = clusters.core.list_namespaced_persistent_volume_claim(clusters.namespace).items
    assert sorted(str(p.metadata.name) for p in pvcs) == sorted(ids), "a PVC is missing or left over"
    assert_no_write_lost(clusters, name, writer)


def test_apiserver_restart_during_a_resize(clusters: Clusters, apiserver_restarts: list[tuple[str, str]]) -> None:
    """kube-apiserver restarted while 3 -> 5 is half done: the cluster converges both ways. The
    operator either rides the outage out or, when it could not renew its lease within the renew
    deadline (the restart takes ~10-25 s here), gives up leadership and exits by design
    (EXIT_LOST_LEADERSHIP, never acting without the lease), restarts and takes over again;
    nothing else may restart it."""
    sandbox, name = clusters.sandbox, "apirestart"
    clusters.create(etcd_cluster(name, size=3))
    clusters.wait_running(name, ready=3, timeout=240)
    restarts = operator_container_status(running_operator_pod(sandbox)).restart_count
    with writing(clusters, name) as writer:
        clusters.patch_spec(name, {"size": 5})
        wait_for(lambda: len(clusters.member_list(name)) >= 4, timeout=120, what="the resize under way")
        started = _log_timestamp()
        sandbox.faults.restart_apiserver()  # returns once the new one is ready
        apiserver_restarts.append((started, _log_timestamp()))
        wait_converged(clusters, name, 5, DEFAULT_VERSION, "size 5 after the apiserver restart")
        drive(clusters, name, writer, {"size": 3}, 3, DEFAULT_VERSION)
    assert_no_write_lost(clusters, name, writer)
    pod = running_operator_pod(sandbox)
    status = operator_container_status(pod)
    if status.restart_count != restarts:
        previous = operator_pod_logs(sandbox, pod.metadata.name, previous=True)
        terminated = status.last_state.terminated
        assert status.restart_count == restarts + 1 and terminated is not None, status
        assert terminated.exit_code == EXIT_LOST_LEADERSHIP and "could not renew lease" in previous, (
            f"the operator restarted for another reason than a lease it could not renew "
            f"(exit {terminated.exit_code}):\n{previous[-2000:]}")
        print(f"operator gave up leadership during the apiserver restart and came back "
              f"(exit {terminated.exit_code})")

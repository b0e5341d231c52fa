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
so every failpoint is armed again."""
from __future__ import annotations

import re
import secrets
from typing import Any, Iterator

import pytest

from etcd_operator import failpoints as fp
from kube_sandbox.binaries import newest_etcd_version
from kube_sandbox.testing import Sandbox, wait_for
from tests.integration.etcd_operator.client_writes import Writer
from tests.integration.etcd_operator.etcd_data import describe_members, read_prefix, started
from tests.integration.etcd_operator.operator_clusters import Clusters, etcd_cluster
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
from tests.integration.etcd_operator.status_history import conditions

pytestmark = pytest.mark.failure_injection

OLD, NEW = newest_etcd_version("3.5"), newest_etcd_version("3.6")
IMAGE = "quay.io/coreos/etcd:v{}"
PREFIX = "chaos/"
FIRED_FILE = "/tmp/failpoints-fired"  # on the operator pod's /tmp emptyDir: survives container restarts
# Effects a resize goes through (it removes followers only, so leadership never moves); an
# upgrade of emptyDir members adds a new member, promotes it, removes an old one, and moves
# leadership off the old leader before removing it last.
RESIZE_EFFECTS = (fp.MEMBER_ADD, fp.POD_CREATE, fp.PROMOTE, fp.MEMBER_REMOVE, fp.POD_DELETE)
UPGRADE_EFFECTS = fp.EFFECTS
CONVERGE_TIMEOUT_SECONDS = 420.0


@pytest.fixture
def clusters(operator: Sandbox, namespace: str) -> Iterator[Clusters]:
    """As conftest's, plus: the operator is put back to its plain manifest (no failpoints) after
    the test, whatever happened. The operator restarts here, so Forbidden lines are compared as
    sets (its log starts over)."""
    before = set(forbidden_lines(operator_logs(operator)))
    try:
        yield Clusters(operator, namespace)
    finally:
        deploy_operator(operator)
        wait_operator_leading(operator)
    new = [line for line in forbidden_lines(operator_logs(operator)) if line not in before]
    assert not new, "operator made forbidden requests:\n" + "\n".join(new[-5:])


def _arm(sandbox: Sandbox, namespace: str, failpoints: set[str]) -> None:
    """A fresh operator pod with `failpoints` armed for clusters of `namespace` only."""
    deploy_operator_with_env(sandbox, {
        fp.FAILPOINTS_ENV: ",".join(sorted(failpoints)),
        fp.NAMESPACE_ENV: namespace,
        fp.FIRED_FILE_ENV: FIRED_FILE,
    }, revision=secrets.token_hex(4))
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
    assert fired == expected, f"fired {sorted(fired)}, armed {sorted(expected)}"
    assert status.restart_count == len(expected), (
        f"{status.restart_count} operator restarts for {len(expected)} failpoints: something else killed it")
    terminated = status.last_state.terminated
    assert terminated is not None and terminated.exit_code == fp.FAILPOINT_EXIT_CODE, status.last_state
    previous = operator_pod_logs(sandbox, pod.metadata.name, previous=True)
    last = re.findall(r"failpoint (\S+) fired", previous)
    assert last and last[-1] in expected, f"the killed operator's log names no failpoint:\n{previous[-2000:]}"
    return f"fired {', '.join(sorted(fired))} ({status.restart_count} restarts, last exit {terminated.exit_code})"


def _converged(clusters: Clusters, name: str, size: int, version: str, last: list[str]) -> bool:
    """The spec reached and nothing left over: `size` members in etcd, all started voting members;
    exactly their pods (none terminating, no leftover), all on `version`; status Running."""
    status = clusters.status(name)
    members = clusters.member_list(name)
    pods = clusters.pods(name)
    pod_names = sorted(p.metadata.name for p in pods)
    images = {p.spec.containers[0].image for p in pods}
    last[:] = [f"status {status.get('phase')} {status.get('readyCount')}/{status.get('size')} "
               f"current={status.get('currentVersion')} message={status.get('message')!r}; "
               f"members: {describe_members(members)}; pods {pod_names} images {sorted(images)}"]
    return (status.get("phase") == "Running" and status.get("size") == size and status.get("readyCount") == size
            and status.get("currentVersion") == version
            and conditions(status).get("Upgrading", ("False",))[0] == "False"
            and len(members) == size and all(started(m) and not m.get("isLearner") for m in members)
            and sorted(m["name"] for m in members) == pod_names
            and all(p.metadata.deletion_timestamp is None for p in pods)
            and images == {IMAGE.format(version)})


def _drive(clusters: Clusters, name: str, writer: Writer, spec: dict[str, Any], size: int, version: str) -> None:
    """Patch the spec, wait until converged to it, and check that writes still go through."""
    clusters.patch_spec(name, spec)
    last: list[str] = []
    try:
        wait_for(lambda: _converged(clusters, name, size, version, last), timeout=CONVERGE_TIMEOUT_SECONDS,
                 what=f"{name} converged to {spec}")
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast seen: {last}") from None
    count = len(writer.acknowledged)
    wait_for(lambda: writer.progressed(count + 3), timeout=60, what=f"writes after {spec}")


@pytest.mark.parametrize("when", fp.WHENS)
def test_operator_killed_at_each_failpoint_of_a_resize_and_an_upgrade(clusters: Clusters, when: fp.When) -> None:
    sandbox, name = clusters.sandbox, "chaos"
    clusters.create(etcd_cluster(name, size=3, version=OLD))
    clusters.wait_running(name, ready=3, timeout=240)
    writer = Writer(sandbox, clusters.client_url(name), PREFIX)
    writer.start()
    report: list[str] = []
    try:
        wait_for(lambda: writer.progressed(5), timeout=60, what="writer making progress")

        resize = {fp.failpoint_name(when, e) for e in RESIZE_EFFECTS}
        _arm(sandbox, clusters.namespace, resize)
        _drive(clusters, name, writer, {"size": 5}, 5, OLD)
        _drive(clusters, name, writer, {"size": 3}, 3, OLD)
        report.append(f"resize 3->5->3: {_assert_fired(sandbox, resize)}")

        upgrade = {fp.failpoint_name(when, e) for e in UPGRADE_EFFECTS}
        _arm(sandbox, clusters.namespace, upgrade)
        _drive(clusters, name, writer, {"version": NEW}, 3, NEW)
        report.append(f"upgrade {OLD}->{NEW}: {_assert_fired(sandbox, upgrade)}")
    finally:
        writer.finish()

    print(f"\n{when}: " + "; ".join(report) +
          f"; writes: {len(writer.acknowledged)} acknowledged, {len(writer.failures)} failed "
          f"{sorted({error for _, error in writer.failures})[:3]}")
    stored = read_prefix(sandbox, clusters.member_urls(name), PREFIX)
    lost = {k: v for k, v in writer.acknowledged.items() if stored.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged writes lost or changed, e.g. {sorted(lost)[:5]}"

"""A cluster the CoreOS etcd-operator created and left running is taken over without restarting or
replacing a member and without losing a key, then run like one of ours: a dead CoreOS member
(restartPolicy Never) is replaced, the cluster is resized 3 -> 5 -> 3 and upgraded 3.5 -> 3.6.

The CoreOS cluster is made while our operator is stopped, the way the CoreOS operator made it
(`coreos_pods.py`): its services, a seed pod with a new token, then each further member added to
etcd as a voting member before its pod is created with state `existing`; data written through
the client service; the CoreOS `status`. Then our operator starts.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from kube_sandbox.binaries import DEBIAN_ETCD_VERSION, newest_etcd_version
from kube_sandbox.testing import wait_for
from tests.integration.etcd_operator.coreos_pods import (
    client_url,
    coreos_cluster,
    coreos_member_pod,
    coreos_member_pvc,
    coreos_services,
    coreos_status,
    new_cluster_token,
    peer_url,
    unique_member_name,
)
from tests.integration.etcd_operator.etcd_data import describe_members, member_ids, read_prefix, started
from tests.integration.etcd_operator.operator_clusters import GROUP, PLURAL, VERSION, Clusters
from tests.integration.etcd_operator.operator_deployment import operator_stopped

# It stops, restarts or reconfigures the operator every other test relies on.
pytestmark = pytest.mark.alone

SIZE = 3
KEYS = {f"/adopted/key-{i:02d}": f"value-{i}" for i in range(20)}
# The etcd a CoreOS cluster runs when we take it over, and the versions it is then upgraded to,
# one minor version at a time: 3.5, or 3.4 (supported only as an upgrade source).
# With `pvc`, spec.pod.persistentVolumeClaimSpec: CoreOS gave every member but the seed a PVC.
SERVING_LABEL = "etcd.database.coreos.com/serving"
@dataclass(frozen=True)
class Adopted:
    """One CoreOS-made cluster: its name, etcd version, the upgrades it then takes, PVCs or not."""
    name: str
    version: str
    upgrades: tuple[str, ...]
    pvc: bool


ADOPTED = (
    Adopted("coreos-35", newest_etcd_version("3.5"), (newest_etcd_version("3.6"),), False),
    Adopted("coreos-34", DEBIAN_ETCD_VERSION, (newest_etcd_version("3.5"), newest_etcd_version("3.6")), False),
    Adopted("coreos-35-pvc", newest_etcd_version("3.5"), (newest_etcd_version("3.6"),), True),
)
PVC_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
POD_POLICY_HASH = "etcd.database.coreos.com/pod-policy-hash"  # on every pod our operator makes
# Events our operator records when it changes membership or pods; none may follow the adoption.
CHANGE_EVENTS = {"MemberAdded", "MemberRemoved", "MemberPromoted", "PodDeleted", "MemberPodCreated",
                 "SeedMemberCreated", "MemberUpgrading", "LeaderMoved", "ServicesCreated"}


def _pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _wait_pod_ready(clusters: Clusters, name: str) -> None:
    def ready() -> bool:
        pod = clusters.core.read_namespaced_pod(name, clusters.namespace)
        if pod.status.phase in ("Failed", "Succeeded"):
            raise AssertionError(f"CoreOS member pod {name} ended: {pod.status}")
        return _pod_ready(pod)
    wait_for(ready, timeout=120, what=f"CoreOS member pod {name} ready")


def _member_add(clusters: Clusters, endpoints: list[str], member: str, url: str) -> None:
    """`etcdctl member add` as CoreOS did it: a voting member, before its pod exists (so a 1 -> 2
    add leaves the cluster without quorum until the pod starts). Retried only while etcd refuses
    it as unhealthy (members not connected long enough), which changes nothing."""
    def added() -> bool:
        result = clusters.sandbox.etcdctl(endpoints, "member", "add", member, f"--peer-urls={url}")
        if result.returncode == 0:
            return True
        if "unhealthy cluster" in result.stderr:
            return False
        raise AssertionError(f"member add {member}: {result.stderr.strip()[-400:]}")
    wait_for(added, timeout=60, what=f"member add {member}")


def _bootstrap_coreos_cluster(clusters: Clusters, name: str, version: str, pvc: bool) -> list[str]:
    """The EtcdCluster, services, member pods and status the CoreOS operator would have left;
    returns the member names, seed first. The last member's pod has the `/bin/sh -ec` command of
    CoreOS releases before 0.9 (a cluster keeps such pods across operator upgrades)."""
    ns = clusters.namespace
    cluster = clusters.create(coreos_cluster(name, SIZE, version, pvc_spec=PVC_SPEC if pvc else None))
    for service in coreos_services(cluster):
        clusters.core.create_namespaced_service(ns, service)
    token = new_cluster_token()
    members: list[str] = []
    initial: list[tuple[str, str]] = []
    for index in range(SIZE):
        member = unique_member_name(name)
        url = peer_url(name, ns, member)
        if index:
            _member_add(clusters, [client_url(name, ns, m) for m in members], member, url)
        initial.append((member, url))
        if index and pvc:
            clusters.core.create_namespaced_persistent_volume_claim(ns, coreos_member_pvc(cluster, member))
        pod = coreos_member_pod(cluster, member, version=version, initial_cluster=initial,
                                state="existing" if index else "new", token=token, shell=index == SIZE - 1)
        clusters.core.create_namespaced_pod(ns, pod)
        _wait_pod_ready(clusters, member)
        members.append(member)
    service_url = clusters.client_url(name)
    for key, value in KEYS.items():
        result = clusters.sandbox.etcdctl([service_url], "put", key, value)
        assert result.returncode == 0, f"put {key} through {service_url}: {result.stderr}"
    clusters.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, name,
        {"status": coreos_status(size=SIZE, ready=members, version=version, service_name=f"{name}-client")})
    return members


def _pods(clusters: Clusters, name: str) -> dict[str, tuple[str, int]]:
    """Live member pods: name -> (uid, restarts of the etcd container)."""
    result = {}
    for pod in clusters.live_pods(name):
        restarts = sum(s.restart_count for s in pod.status.container_statuses or [])
        result[pod.metadata.name] = (pod.metadata.uid, restarts)
    return result


def _keys(clusters: Clusters, name: str) -> dict[str, str]:
    return read_prefix(clusters.sandbox, [clusters.client_url(name)], "/adopted/")


def _change_events(clusters: Clusters, name: str) -> list[str]:
    return [f"{e.reason}: {e.message}" for e in clusters.events(name) if e.reason in CHANGE_EVENTS]


def _wait_members(clusters: Clusters, name: str, count: int, version: str | None = None,
                  timeout: float = 240) -> dict[str, Any]:
    """Running with `count` ready voting members (and every pod at `version`)."""
    def done() -> dict[str, Any] | None:
        status = clusters.status(name)
        members = clusters.member_list(name)
        pods = clusters.live_pods(name)
        ok = (status.get("phase") == "Running" and status.get("readyCount") == count and status.get("size") == count
              and len(members) == count and all(started(m) and not m.get("isLearner") for m in members)
              and len(pods) == count)
        if ok and version is not None:
            ok = status.get("currentVersion") == version and all(
                (p.metadata.annotations or {}).get("etcd.version") == version for p in pods)
        return status if ok else None
    return wait_for(done, timeout=timeout,
                    what=f"{name}: Running with {count} ready members" + (f" at {version}" if version else ""))


def _each_concurrently(what: str, step: Callable[[Adopted], None]) -> None:
    """`step` for every adopted cluster at once (an operator runs many clusters side by side);
    every cluster's failure is reported, not only the first."""
    with ThreadPoolExecutor(max_workers=len(ADOPTED)) as pool:
        futures = {adopted.name: pool.submit(step, adopted) for adopted in ADOPTED}
    failures = {name: future.exception() for name, future in futures.items() if future.exception() is not None}
    if failures:
        raise AssertionError(f"{what}: " + "\n".join(
            f"--- {name}:\n{''.join(traceback.format_exception(error))}" for name, error in failures.items()))


def test_coreos_clusters_are_adopted_without_restarts_then_repaired_resized_and_upgraded(clusters: Clusters) -> None:
    """Three CoreOS-made clusters (3.5, 3.4, 3.5 on PVCs) are made while our operator is stopped;
    it then adopts all three and each is repaired, resized and upgraded, side by side."""
    made: dict[str, tuple[list[str], dict[str, tuple[str, int]], dict[str, Any]]] = {}

    def make(adopted: Adopted) -> None:
        started_at = time.monotonic()
        name = adopted.name
        coreos_members = _bootstrap_coreos_cluster(clusters, name, adopted.version, adopted.pvc)
        pods_before = _pods(clusters, name)
        ids_before = member_ids(clusters, name)
        assert sorted(pods_before) == sorted(coreos_members) == sorted(ids_before), (pods_before, ids_before)
        assert _keys(clusters, name) == KEYS
        assert clusters.status(name)["phase"] == "Running"  # the CoreOS status, before we ever wrote one
        print(f"\n{name}: CoreOS-shaped cluster bootstrapped in {time.monotonic() - started_at:.1f}s")
        made[name] = (coreos_members, pods_before, ids_before)

    with operator_stopped(clusters.sandbox):
        _each_concurrently("making the CoreOS clusters", make)
    adoption_started = time.monotonic()  # our operator started as the block ended
    _each_concurrently("adopting and running the CoreOS clusters",
                       lambda adopted: _adopted_and_run_like_ours(clusters, adopted, *made[adopted.name],
                                                                  adoption_started))


def _adopted_and_run_like_ours(clusters: Clusters, adopted: Adopted, coreos_members: list[str],
                               pods_before: dict[str, tuple[str, int]], ids_before: dict[str, Any],
                               adoption_started: float) -> None:
    name, version, upgrades, pvc = adopted.name, adopted.version, adopted.upgrades, adopted.pvc
    # Adopted: our status (our fields and conditions), same pods, same members, same data.
    status = clusters.wait_status(
        name, lambda s: s.get("readyCount") == SIZE and s.get("phase") == "Running" and "observedGeneration" in s,
        "our status written: Running, 3 ready", timeout=120)
    print(f"{name}: adopted (our status Running 3/3) {time.monotonic() - adoption_started:.1f}s after our operator "
          "was scaled up")
    conditions = {c["type"]: (c["status"], c.get("reason", "")) for c in status["conditions"]}
    assert conditions["Available"][0] == "True", conditions
    if version.startswith("3.4."):
        assert conditions["VersionSupported"] == ("False", "UpgradeSourceOnly"), conditions
        wait_for(lambda: any(e.reason == "UpgradeSourceOnly" and e.type == "Warning" for e in clusters.events(name)),
                 timeout=30, what="UpgradeSourceOnly Warning event")
    else:
        assert conditions["VersionSupported"] == ("True", "Supported"), conditions
    assert all(conditions[t][0] == "False" for t in ("Scaling", "Upgrading", "Recovering", "Degraded")), conditions
    assert status["currentVersion"] == version and status["bootstrapped"] is True, status
    assert sorted(status["members"]["ready"]) == sorted(coreos_members), status
    # Upgrading=False: no member's pod counts as outdated (image or pod policy), so none is rolled.
    assert _pods(clusters, name) == pods_before, "a CoreOS member pod was restarted or replaced"
    assert member_ids(clusters, name) == ids_before, describe_members(clusters.member_list(name))
    assert _change_events(clusters, name) == [], _change_events(clusters, name)
    assert _keys(clusters, name) == KEYS
    # Its peer service relied on the tolerate-unready-endpoints annotation, which cluster DNS no
    # longer reads: it now publishes members before they are ready (a joining learner must resolve).
    peer = wait_for(lambda: (lambda s: s if s.spec.publish_not_ready_addresses else None)(
        clusters.core.read_namespaced_service(name, clusters.namespace)), timeout=60, what="peer service fixed")
    assert peer.spec.cluster_ip == "None"
    assert any(e.reason == "ServiceUpdated" for e in clusters.events(name))
    # Its client service selected members by app and cluster only: the members are labelled
    # serving (no restart), then the selector requires the label, so a member can be drained of
    # clients before it is removed; clients reach the same members through it throughout.
    client = wait_for(lambda: (lambda s: s if (s.spec.selector or {}).get(SERVING_LABEL) == "true" else None)(
        clusters.core.read_namespaced_service(f"{name}-client", clusters.namespace)), timeout=60,
        what="client service selecting serving members")
    assert {k: v for k, v in client.spec.selector.items() if k != SERVING_LABEL} == {"app": "etcd", "etcd_cluster": name}
    assert all((p.metadata.labels or {}).get(SERVING_LABEL) == "true" for p in clusters.live_pods(name))
    assert _pods(clusters, name) == pods_before, "labelling a CoreOS member pod restarted it"
    assert _keys(clusters, name) == KEYS

    # A CoreOS pod never restarts (restartPolicy Never): when its etcd dies the pod fails. On
    # emptyDir its data goes with it: the member is replaced by one of ours while the other two keep
    # quorum. On a PVC the member restarts, in a pod of ours, on its volume: same member, same data.
    victim = coreos_members[1] if pvc else coreos_members[0]  # CoreOS's seed has no PVC
    clusters.sandbox.faults.crash_container(clusters.namespace, victim, "etcd")
    step = time.monotonic()
    if pvc:
        def restarted_on_volume() -> bool:
            pod = _pods(clusters, name).get(victim)
            return pod is not None and pod[0] != pods_before[victim][0] and member_ids(clusters, name).get(victim) == ids_before[victim]
        wait_for(restarted_on_volume, timeout=120, what=f"failed CoreOS member {victim} restarted on its volume")
    else:
        wait_for(lambda: victim not in member_ids(clusters, name) and victim not in _pods(clusters, name),
                 timeout=120, what=f"failed CoreOS member {victim} removed and its pod deleted")
    _wait_members(clusters, name, SIZE)
    print(f"{name}: failed CoreOS member {'restarted on its volume' if pvc else 'replaced'} in {time.monotonic() - step:.1f}s")
    survivors = {m: pods_before[m] for m in coreos_members if m != victim}
    assert {m: _pods(clusters, name)[m] for m in survivors} == survivors
    assert _keys(clusters, name) == KEYS

    # Resized like our own clusters; the CoreOS members stay as they are while they are kept.
    step = time.monotonic()
    clusters.patch_spec(name, {"size": 5})
    _wait_members(clusters, name, 5)
    print(f"{name}: 3 -> 5 in {time.monotonic() - step:.1f}s")
    step = time.monotonic()
    assert _keys(clusters, name) == KEYS
    clusters.patch_spec(name, {"size": 3})
    _wait_members(clusters, name, 3)
    print(f"{name}: 5 -> 3 in {time.monotonic() - step:.1f}s")
    assert _keys(clusters, name) == KEYS
    for member, (uid, restarts) in _pods(clusters, name).items():
        if member in survivors:
            assert (uid, restarts) == survivors[member], f"CoreOS member {member} was restarted"

    # Upgraded member by member, one minor version at a time: every CoreOS pod is replaced by one of ours.
    for target in upgrades:
        step = time.monotonic()
        clusters.patch_spec(name, {"version": target})
        _wait_members(clusters, name, 3, version=target, timeout=360)
        print(f"{name}: upgraded to {target} in {time.monotonic() - step:.1f}s")
        assert _keys(clusters, name) == KEYS
    ours = {p.metadata.name: (p.metadata.annotations or {}).get(POD_POLICY_HASH) for p in clusters.live_pods(name)}
    assert all(ours.values()), f"pods not made by our operator after the upgrade: {ours}"
    assert _keys(clusters, name) == KEYS

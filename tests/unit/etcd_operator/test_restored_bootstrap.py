"""A restored cluster with a claim staged per member bootstraps all its members at once (etcd's
disaster-recovery procedure), each restoring its own copy with all of them in --initial-cluster;
an operator stopped between the creates finishes them with the same --initial-cluster."""
from __future__ import annotations

from typing import Any

import pytest

from etcd_common.api import constants as c
from etcd_common.etcd.access import EtcdAccess
from etcd_common.seed.pod import RESTORE_CONTAINER, STAGED_VOLUME
from etcd_operator import actions as a
from etcd_operator.acting import ActionExecutor
from etcd_operator.manifests import INITIAL_CORRUPT_CHECK_FLAGS
from etcd_operator.observed import ObservedCluster, parse_pod
from etcd_operator.planning import plan_next_action
from etcd_operator.spec import parse_etcd_cluster
from operator_runtime.cache import ObjectCache
from operator_runtime.cached_client import CachedClient
from tests.unit.etcd_operator.etcd_cluster_builders import raw_cluster
from tests.unit.etcd_operator.recording_api import RecordingApi

CLAIMS = ["example-restore-staging", "example-restore-staging-1", "example-restore-staging-2"]


def _restore(claims: list[str]) -> dict[str, Any]:
    restore: dict[str, Any] = {"backupStorageType": "S3", "s3": {"path": "bucket/key", "awsSecret": "aws"},
                               "sha256": "ab" * 32, "stagedClaim": claims[0]}
    if len(claims) > 1:
        restore["stagedClaims"] = claims
    return restore


def _observed(size: int, claims: list[str], pods: list[dict[str, Any]] = ()) -> ObservedCluster:  # type: ignore[assignment]
    cluster = parse_etcd_cluster(raw_cluster({"size": size, "restore": _restore(claims)}, status={}))
    return ObservedCluster(cluster=cluster, services=frozenset({cluster.name, f"{cluster.name}-client"}),
                           pods=tuple(parse_pod(p) for p in pods), member_list_error="no endpoints")


def recording_executor(api: RecordingApi, pods: ObjectCache) -> ActionExecutor:
    return ActionExecutor(CachedClient(api, pods), CachedClient(api, ObjectCache()),  # type: ignore[arg-type]
                          CachedClient(api, ObjectCache()), EtcdAccess(lambda ns, name: {}))  # type: ignore[arg-type]


def _flag(pod: dict[str, Any], flag: str) -> str:
    container = pod["spec"]["containers"][0]
    return next(arg.split("=", 1)[1] for arg in container["command"] if arg.startswith(f"--{flag}="))


def _staged_claim(pod: dict[str, Any]) -> str:
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == STAGED_VOLUME)
    return str(volume["persistentVolumeClaim"]["claimName"])


def test_every_member_starts_at_once_from_its_own_staged_copy() -> None:
    observed = _observed(3, CLAIMS)
    action = plan_next_action(observed)
    assert isinstance(action, a.CreateRestoredMembers), action
    names = [name for name, _ in action.initial_cluster]
    assert len(set(names)) == 3 and action.create == tuple(names)

    api, pods = RecordingApi(), ObjectCache()
    recording_executor(api, pods).execute(action, observed)

    created = {p["metadata"]["name"]: p for p in api.created}
    assert sorted(created) == sorted(names)
    everyone = ",".join(f"{name}={url}" for name, url in action.initial_cluster)
    for index, name in enumerate(names):
        pod = created[name]
        assert _flag(pod, "initial-cluster") == everyone
        assert _flag(pod, "initial-cluster-state") == "new"
        assert _staged_claim(pod) == CLAIMS[index]
        restore = next(c for c in pod["spec"]["initContainers"] if c["name"] == RESTORE_CONTAINER)
        assert f"--name={name}" in restore["command"]
        assert f"--initial-cluster={everyone}" in restore["command"]
    # All of them serve clients once ready: none is a learner.
    assert all(p["metadata"]["labels"].get(c.LABEL_SERVING) == c.LABEL_SERVING_VALUE for p in created.values())


def test_an_interrupted_bootstrap_creates_only_the_missing_members_with_the_same_initial_cluster() -> None:
    first = plan_next_action(_observed(3, CLAIMS))
    assert isinstance(first, a.CreateRestoredMembers)
    api, pods = RecordingApi(), ObjectCache()
    recording_executor(api, pods).execute(first, _observed(3, CLAIMS))
    seed = api.created[0]  # the operator stopped after its first create

    again = plan_next_action(_observed(3, CLAIMS, [seed]))

    assert isinstance(again, a.CreateRestoredMembers), again
    assert again.initial_cluster == first.initial_cluster
    assert again.create == first.create[1:]
    api2 = RecordingApi()
    recording_executor(api2, ObjectCache()).execute(again, _observed(3, CLAIMS, [seed]))
    assert [_staged_claim(p) for p in api2.created] == CLAIMS[1:]
    # Once every pod exists, nothing more is created: the members are waited for.
    waiting = plan_next_action(_observed(3, CLAIMS, [seed, *api2.created]))
    assert isinstance(waiting, a.Wait), waiting


@pytest.mark.parametrize(("size", "claims"), [(3, CLAIMS[:1]), (1, CLAIMS)])
def test_one_claim_or_one_member_bootstraps_the_seed_alone(size: int, claims: list[str]) -> None:
    assert isinstance(plan_next_action(_observed(size, claims)), a.CreateSeedMember)


def test_fewer_members_than_claims_take_the_first_claims() -> None:
    action = plan_next_action(_observed(2, CLAIMS))
    assert isinstance(action, a.CreateRestoredMembers)
    assert len(action.initial_cluster) == 2


def test_members_restored_together_skip_the_initial_corruption_check_a_seed_keeps() -> None:
    """Identical restored data needs no comparison at first start, and etcd's check waits its 7 s
    timeout on a peer that listens but does not answer yet: every member starts at once."""
    observed = _observed(3, CLAIMS)
    api = RecordingApi()
    recording_executor(api, ObjectCache()).execute(plan_next_action(observed), observed)
    flags = {flag for pod in api.created for flag in pod["spec"]["containers"][0]["command"]}
    assert not flags & set(INITIAL_CORRUPT_CHECK_FLAGS.values())

    single = _observed(3, CLAIMS[:1])
    api = RecordingApi()
    recording_executor(api, ObjectCache()).execute(plan_next_action(single), single)
    assert INITIAL_CORRUPT_CHECK_FLAGS["3.6"] in api.created[0]["spec"]["containers"][0]["command"]

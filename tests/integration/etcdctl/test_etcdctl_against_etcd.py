"""The etcdctl wrapper (with the operator's default etcdctl, 3.6) against real etcd 3.4.23, 3.5.35
and 3.6.16 processes on loopback: membership with learners on each, the operator's two upgrade
paths 3.4 -> 3.5 -> 3.6 (learner replacement on emptyDir, restart in place on a volume), and
snapshots saved with etcdctl and read with etcdutl."""
from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from etcd_common.etcd.etcdctl import (
    ClusterUnhealthy,
    Etcdctl,
    EtcdctlError,
    LearnerNotReady,
    PeerURLExists,
    SnapshotInvalid,
    TooManyLearners,
    Unreachable,
    default_binary,
    default_etcdutl_binary,
)
from etcd_common.etcd.etcdutl import snapshot_restore, snapshot_status
from etcd_common.etcd.types import Member
from kube_sandbox.binaries import built_etcd_versions
from tests.integration.etcdctl.etcd_processes import ETCD_VERSIONS, EtcdCluster, etcd_dir, wait_for

ClusterFactory = Callable[[str], EtcdCluster]

# Nothing listens here: an address of the same loopback block that no fixture hands out.
DEAD_ENDPOINT = "http://127.0.49.254:23790"


def test_fresh_cluster_lists_its_seed_and_stores_keys(etcd_cluster: EtcdCluster, etcd_version: str) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()

    [member] = etcdctl.member_list()
    assert member.name == "m1"
    assert member.peer_urls == (seed.peer_url,)
    assert member.client_urls == (seed.client_url,)
    assert member.started and not member.is_learner

    [status] = etcdctl.endpoint_status()
    assert status.reachable and status.is_leader and status.member_id == member.id
    assert status.version == etcd_version
    assert status.raft_term >= 1 and status.raft_index >= 1 and status.db_size > 0

    etcdctl.put("greeting", "--hello world--")
    assert etcdctl.get("greeting") == "--hello world--"
    assert etcdctl.get("absent") is None


def test_learner_is_added_rejected_twice_and_promoted_once_in_sync(etcd_cluster: EtcdCluster) -> None:
    etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    second = etcd_cluster.new_member("m2")

    added = etcd_cluster.add_learner(etcdctl, "m2", second.peer_url)
    assert added.id != 0 and added.is_learner
    assert added.peer_urls == (second.peer_url,)
    assert not added.started, "a member that never ran has no name and no client URLs"
    assert added in etcdctl.member_list()

    with pytest.raises(PeerURLExists):
        etcdctl.member_add("m2-again", [second.peer_url], learner=True)
    with pytest.raises(TooManyLearners):
        etcdctl.member_add("m3", ["http://127.0.49.253:23800"], learner=True)
    with pytest.raises(LearnerNotReady):
        etcdctl.member_promote(added.id)

    etcd_cluster.start_added_member(second, etcdctl.member_list())
    started = time.monotonic()
    wait_for(
        lambda: _promoted(etcdctl, added.id), timeout=20, what="learner promoted", interval=0.1,
        describe=etcd_cluster.describe,
    )
    print(f"learner promotable {time.monotonic() - started:.2f}s after its start")
    etcdctl.member_promote(added.id)  # already voting: quietly done

    etcd_cluster.wait_healthy(second)
    members = wait_for(
        lambda: _all_started(etcdctl), timeout=10, what="both members started", describe=etcd_cluster.describe
    )
    assert sorted(m.name for m in members) == ["m1", "m2"]
    assert not any(m.is_learner for m in members)


def _all_started(etcdctl: Etcdctl) -> list[Member] | None:
    members = etcdctl.member_list()
    return members if all(m.started for m in members) else None


def _promoted(etcdctl: Etcdctl, member_id: int) -> bool:
    try:
        etcdctl.member_promote(member_id)
    except LearnerNotReady:
        return False
    return True


def test_removing_a_member_twice_is_quiet(etcd_cluster: EtcdCluster) -> None:
    etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    ghost = etcd_cluster.add_learner(etcdctl, "m2", "http://127.0.49.252:23800")

    etcdctl.member_remove(ghost.id)
    etcdctl.member_remove(ghost.id)

    assert [m.name for m in etcdctl.member_list()] == ["m1"]


def test_dead_endpoints_are_reported_beside_live_ones(etcd_cluster: EtcdCluster) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = Etcdctl([DEAD_ENDPOINT, seed.client_url], dial_timeout_seconds=0.5, command_timeout_seconds=1.0)

    dead, live = etcdctl.endpoint_status()
    assert (dead.endpoint, dead.reachable) == (DEAD_ENDPOINT, False)
    assert dead.errors and "deadline" in dead.errors[0]
    assert (live.endpoint, live.reachable, live.is_leader) == (seed.client_url, True, True)

    dead_health, live_health = etcdctl.endpoint_health()
    assert (dead_health.endpoint, dead_health.healthy) == (DEAD_ENDPOINT, False) and dead_health.error
    assert (live_health.endpoint, live_health.healthy, live_health.error) == (seed.client_url, True, "")

    assert [m.name for m in etcdctl.member_list()] == ["m1"], "a dead first endpoint is skipped"


def test_only_dead_endpoints_raise_unreachable_within_the_timeouts() -> None:
    etcdctl = Etcdctl([DEAD_ENDPOINT], dial_timeout_seconds=0.5, command_timeout_seconds=1.0)
    started = time.monotonic()
    with pytest.raises(Unreachable):
        etcdctl.endpoint_status()
    with pytest.raises(Unreachable):
        etcdctl.member_list()
    assert time.monotonic() - started < 2 * (0.5 + 1.0 + 1.0)


def test_leadership_moves_to_the_member_asked_for(etcd_cluster: EtcdCluster) -> None:
    members, _ = etcd_cluster.grow(2)
    live_only = etcd_cluster.etcdctl()
    leader = next(s for s in live_only.endpoint_status() if s.is_leader)
    follower = next(s for s in live_only.endpoint_status() if not s.is_leader)
    with_a_dead_endpoint = Etcdctl([DEAD_ENDPOINT] + [m.client_url for m in members], command_timeout_seconds=1.0)

    with_a_dead_endpoint.move_leader(follower.member_id)

    new_leader = wait_for(
        lambda: next((s for s in live_only.endpoint_status() if s.is_leader), None),
        timeout=10, what="a leader after the move", describe=etcd_cluster.describe,
    )
    assert new_leader.member_id == follower.member_id != leader.member_id
    live_only.move_leader(follower.member_id)  # already the leader: nothing to do


def test_member_add_right_after_a_promotion_is_refused_as_unhealthy(etcd_cluster: EtcdCluster) -> None:
    """etcd (3.4 and 3.5) refuses membership changes until every voting member has been
    connected for 5 s (strict reconfig check); the operator must treat that as "retry later"."""
    members, timings = etcd_cluster.grow(2)
    etcdctl = etcd_cluster.etcdctl()
    third = etcd_cluster.new_member("m3")

    started = time.monotonic()
    with pytest.raises(ClusterUnhealthy):
        etcdctl.member_add("m3", [third.peer_url], learner=True)
    wait_for(
        lambda: _added(etcdctl, "m3", third.peer_url), timeout=15, what="member add accepted", interval=0.2,
        describe=etcd_cluster.describe,
    )
    print(f"grow(2) timings {timings}; add refused for {time.monotonic() - started:.2f}s after promotion")


def _added(etcdctl: Etcdctl, name: str, peer_url: str) -> bool:
    try:
        etcdctl.member_add(name, [peer_url], learner=True)
    except ClusterUnhealthy:
        return False
    return True


def test_the_operator_uses_etcdctl_3_6() -> None:
    """What every other test here runs: the default etcdctl is the newest release's."""
    output = subprocess.run([default_binary(), "version"], capture_output=True, text=True, check=True).stdout
    assert f"etcdctl version: {ETCD_VERSIONS[-1]}" in output, output
    output = subprocess.run([default_etcdutl_binary(), "version"], capture_output=True, text=True, check=True).stdout
    assert f"etcdutl version: {ETCD_VERSIONS[-1]}" in output, output


@pytest.mark.parametrize("client_version", ETCD_VERSIONS, ids=lambda version: f"etcdctl-{version}")
def test_every_etcdctl_release_parses_the_same(cluster_factory: ClusterFactory, client_version: str) -> None:
    """The image's own etcdctl (used by the TLS readiness probe) and a configured older one work too."""
    cluster = cluster_factory(ETCD_VERSIONS[-1])
    seed = cluster.start_seed()
    binary = str(etcd_dir(client_version) / "etcdctl")
    etcdctl = Etcdctl([seed.client_url, DEAD_ENDPOINT], binary=binary, command_timeout_seconds=1.0)

    assert [m.name for m in etcdctl.member_list()] == ["m1"]
    live, dead = etcdctl.endpoint_status()
    assert live.is_leader and live.version == ETCD_VERSIONS[-1] and not dead.reachable
    assert [h.healthy for h in etcdctl.endpoint_health()] == [True, False]
    learner = cluster.add_learner(Etcdctl([seed.client_url], binary=binary), "m2", "http://127.0.49.251:23800")
    assert learner.is_learner and not learner.started


def _upgrade_steps() -> list[tuple[str, str]]:
    """(from, to) for each minor step the operator takes: 3.4.23 -> 3.5.35 -> 3.6.16."""
    return list(zip(ETCD_VERSIONS, ETCD_VERSIONS[1:]))


def _versions(etcdctl: Etcdctl) -> list[str]:
    return sorted(status.version for status in etcdctl.endpoint_status())


def test_rolling_upgrade_by_learner_replacement(cluster_factory: ClusterFactory) -> None:
    """The operator's emptyDir upgrade: for each member, a learner of the next minor version joins
    and is promoted, then the old member is removed. 3.4 -> 3.5 -> 3.6, data kept, quorum kept."""
    cluster = cluster_factory(ETCD_VERSIONS[0])
    cluster.grow(3)
    cluster.etcdctl().put("survivor", "written on etcd " + ETCD_VERSIONS[0])
    joined = 0
    for old, new in _upgrade_steps():
        new_binary = str(etcd_dir(new) / "etcd")
        for member in [m for m in cluster.running() if m.binary != new_binary]:
            joined += 1
            cluster.join(f"u{joined}", binary=new_binary)
            cluster.remove(member)
            etcdctl = cluster.etcdctl()
            assert len([m for m in etcdctl.member_list() if not m.is_learner]) == 3
            assert etcdctl.get("survivor") == "written on etcd " + ETCD_VERSIONS[0]
        assert _versions(cluster.etcdctl()) == [new] * 3, f"after {old} -> {new}"
        cluster.etcdctl().put("survivor", "written on etcd " + ETCD_VERSIONS[0])  # the upgraded cluster writes


def test_in_place_upgrade_on_the_same_data(cluster_factory: ClusterFactory) -> None:
    """The operator's upgrade on volumes: each member restarts on its data with the next minor
    version, same member id. 3.4 -> 3.5 -> 3.6."""
    cluster = cluster_factory(ETCD_VERSIONS[0])
    members, _ = cluster.grow(3)
    ids = sorted(m.id for m in cluster.etcdctl().member_list())
    cluster.etcdctl().put("survivor", "kept")
    for _, new in _upgrade_steps():
        for member in members:
            member.stop()
            member.binary = str(etcd_dir(new) / "etcd")
            member.start("unused-on-restart=http://127.0.49.250:23800", "existing", cluster.token)
            cluster.wait_healthy(member)
        etcdctl = cluster.etcdctl()
        wait_for(lambda: _versions(etcdctl) == [new] * 3, timeout=20, what=f"every member on {new}",
                 describe=cluster.describe)
        assert sorted(m.id for m in etcdctl.member_list()) == ids
        assert not any(m.is_learner for m in etcdctl.member_list())
        assert etcdctl.get("survivor") == "kept"


def test_learner_add_and_promote_with_mixed_minor_versions(cluster_factory: ClusterFactory) -> None:
    """Half way through an upgrade the cluster still takes learners (of either version)."""
    old, new = _upgrade_steps()[-1]
    cluster = cluster_factory(old)
    cluster.grow(2)
    cluster.join("new1", binary=str(etcd_dir(new) / "etcd"))
    cluster.join("old3", binary=str(etcd_dir(old) / "etcd"))
    assert _versions(cluster.etcdctl()) == sorted([old, old, new, old])


def _storage_version(version: str, endpoint: str) -> str:
    """`storageVersion` from `etcdctl endpoint status` (etcd 3.6 and later; "" before it is set)."""
    result = subprocess.run([str(etcd_dir(version) / "etcdctl"), f"--endpoints={endpoint}", "endpoint", "status",
                             "-w", "json"], capture_output=True, text=True, timeout=10, check=True)
    return str(json.loads(result.stdout)[0]["Status"].get("storageVersion", ""))


def test_snapshot_saved_with_etcdctl_and_read_with_etcdutl(etcd_cluster: EtcdCluster, etcd_version: str,
                                                           tmp_path: Path) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    for index in range(10):
        etcdctl.put(f"key{index}", "value")
    path = tmp_path / "snapshot.db"
    if etcd_version.startswith("3.6."):
        # etcd 3.6 records its storage version a few seconds after it starts (its version
        # monitor); a snapshot taken before that carries none.
        wait_for(lambda: _storage_version(etcd_version, seed.client_url) == "3.6.0", timeout=30,
                 what="the seed's storage version recorded",
                 describe=lambda: f"storage version {_storage_version(etcd_version, seed.client_url)!r}")

    etcdctl.snapshot_save(str(path))

    status = snapshot_status(str(path))
    assert status.revision == 11, "ten puts after the initial revision 1"
    assert status.hash != 0 and status.total_size > 0 and status.total_keys >= 10
    assert status.storage_version == ("3.6.0" if etcd_version.startswith("3.6.") else ""), status
    assert snapshot_status(str(path)) == status, "the same file, the same hash"
    assert not list(tmp_path.glob("*.part")), "etcdctl renamed its partial file"
    with pytest.raises(ValueError):
        Etcdctl([seed.client_url, DEAD_ENDPOINT]).snapshot_save(str(tmp_path / "two-endpoints.db"))
    etcdctl.snapshot_save(str(tmp_path / "from-named-endpoint.db"), endpoint=seed.client_url)


# etcdutl exists from 3.5 on (3.4 restores with etcdctl): each version's own etcdutl restores.
@pytest.mark.parametrize("version", built_etcd_versions(), ids=lambda version: f"etcd-{version}")
def test_snapshot_restored_with_etcdutl_serves_the_keys(cluster_factory: ClusterFactory, version: str,
                                                        tmp_path: Path) -> None:
    source = cluster_factory(version)
    source.start_seed()
    for index in range(5):
        source.etcdctl().put(f"key{index}", f"value{index}")
    snapshot = tmp_path / "snapshot.db"
    source.etcdctl().snapshot_save(str(snapshot))
    saved = snapshot_status(str(snapshot))
    source.stop()
    etcdutl = str(etcd_dir(version) / "etcdutl")

    restored_cluster = cluster_factory(version)
    member = restored_cluster.new_member("restored")
    initial_cluster = f"restored={member.peer_url}"
    snapshot_restore(str(snapshot), data_dir=str(member.data_dir), name="restored",
                     initial_cluster=initial_cluster, initial_advertise_peer_urls=[member.peer_url],
                     initial_cluster_token=restored_cluster.token, bump_revision=1000, binary=etcdutl)
    member.start(initial_cluster, "new", restored_cluster.token)
    restored_cluster.wait_healthy(member)

    etcdctl = restored_cluster.etcdctl(member)
    assert [etcdctl.get(f"key{index}") for index in range(5)] == [f"value{index}" for index in range(5)]
    [only] = etcdctl.member_list()
    assert (only.name, only.peer_urls) == ("restored", (member.peer_url,)), "a new one-member cluster"
    again = tmp_path / "again.db"
    etcdctl.snapshot_save(str(again))
    assert snapshot_status(str(again)).revision == saved.revision + 1000, "the revision was bumped"
    with pytest.raises(EtcdctlError, match="already exists"):
        snapshot_restore(str(snapshot), data_dir=str(member.data_dir), name="restored",
                         initial_cluster=initial_cluster, initial_advertise_peer_urls=[member.peer_url],
                         initial_cluster_token=restored_cluster.token, binary=etcdutl)


def test_a_broken_snapshot_is_refused(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(b"not an etcd database" * 100)
    with pytest.raises(SnapshotInvalid):
        snapshot_status(str(truncated))
    with pytest.raises(SnapshotInvalid):
        snapshot_restore(str(truncated), data_dir=str(tmp_path / "member"), name="m1",
                         initial_cluster="m1=http://127.0.49.1:23800",
                         initial_advertise_peer_urls=["http://127.0.49.1:23800"], initial_cluster_token="t")
    assert not (tmp_path / "member").exists(), "etcdutl's partial data directory is removed: a retry can run"


def test_snapshot_of_a_dead_member_is_unreachable(tmp_path: Path) -> None:
    etcdctl = Etcdctl([DEAD_ENDPOINT], dial_timeout_seconds=0.5)
    with pytest.raises(Unreachable):
        etcdctl.snapshot_save(str(tmp_path / "never.db"), timeout_seconds=2.0)
    assert not (tmp_path / "never.db").exists()


def test_why_3_4_members_are_not_probed_on_health(cluster_factory: ClusterFactory) -> None:
    """etcd 3.4 answers /health with a v2 QGET through the raft log; a 3.6 member replaying that
    log panics ("detected disallowed v2 WAL"). This is why manifests.py probes 3.4 members with
    `etcdctl endpoint health`: with /health probes the 3.5 -> 3.6 step would fail."""
    source, middle, target = ETCD_VERSIONS[0], ETCD_VERSIONS[1], ETCD_VERSIONS[-1]
    cluster = cluster_factory(source)
    seed = cluster.start_seed()
    with urllib.request.urlopen(f"{seed.client_url}/health", timeout=5) as response:
        assert b'"health":"true"' in response.read()
    upgraded, _ = cluster.join("m2", binary=str(etcd_dir(middle) / "etcd"))
    cluster.remove(seed)
    assert _versions(cluster.etcdctl()) == [middle]

    doomed = cluster.new_member("m3", binary=str(etcd_dir(target) / "etcd"))
    etcdctl = cluster.etcdctl(upgraded)
    etcdctl.member_add("m3", [doomed.peer_url], learner=True)
    cluster.start_added_member(doomed, etcdctl.member_list())
    assert doomed.process is not None
    doomed.process.wait(timeout=30)
    assert "detected disallowed v2 WAL" in doomed.log_path.read_text(errors="replace")

"""The operator's per-pass probe over etcd's HTTP endpoints (etcd_common.etcd.probe) against real
etcd 3.4.23, 3.5.35 and 3.6.16 processes: it answers what etcdctl answers (member list, status,
health), skips a learner and a dead endpoint, sees a learner etcdctl has not promoted yet, and
reads each member's view of its peers (its /metrics)."""
from __future__ import annotations

import time

import pytest

from etcd_common.etcd.alarms import NOSPACE, Alarm
from etcd_common.etcd.etcdctl import Unreachable
from etcd_common.etcd.peer_metrics import PeerView
from etcd_common.etcd.probe import EtcdProbe
from tests.integration.etcdctl.etcd_processes import EtcdCluster, cluster_version_decided, post_json, wait_for

DEAD_ENDPOINT = "http://127.0.49.251:23790"  # nothing listens there (same block as the etcdctl tests')


def test_probe_answers_what_etcdctl_answers(etcd_cluster: EtcdCluster, etcd_version: str) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    probe = EtcdProbe([seed.client_url])

    assert probe.member_list() == etcdctl.member_list()
    [status] = probe.endpoint_status()
    [expected] = etcdctl.endpoint_status()
    assert status.version == etcd_version
    assert (status.endpoint, status.member_id, status.leader_id, status.is_learner) == (
        expected.endpoint, expected.member_id, expected.leader_id, expected.is_learner)
    assert status.is_leader and status.raft_index >= 1 and status.db_size > 0
    [health] = probe.endpoint_health()
    assert (health.endpoint, health.healthy, health.error) == (seed.client_url, True, "")


def test_dead_endpoint_is_reported_and_skipped(etcd_cluster: EtcdCluster) -> None:
    seed = etcd_cluster.start_seed()
    probe = EtcdProbe([DEAD_ENDPOINT, seed.client_url], timeout_seconds=1.0)

    assert [m.name for m in probe.member_list()] == ["m1"], "the dead first endpoint is skipped"
    dead, live = probe.endpoint_status()
    assert (dead.endpoint, dead.reachable) == (DEAD_ENDPOINT, False) and dead.errors
    assert (live.endpoint, live.is_leader) == (seed.client_url, True)
    dead_health, live_health = probe.endpoint_health()
    assert not dead_health.healthy and "refused" in dead_health.error
    assert live_health.healthy

    started = time.monotonic()
    with pytest.raises(Unreachable):
        EtcdProbe([DEAD_ENDPOINT], timeout_seconds=1.0).member_list()
    with pytest.raises(Unreachable):
        EtcdProbe([DEAD_ENDPOINT], timeout_seconds=1.0).endpoint_status()
    assert time.monotonic() - started < 5.0


def test_learner_refuses_the_member_list_and_the_next_endpoint_answers(etcd_cluster: EtcdCluster) -> None:
    seed = etcd_cluster.start_seed()
    etcdctl = etcd_cluster.etcdctl()
    learner = etcd_cluster.new_member("m2")
    added = etcd_cluster.add_learner(etcdctl, "m2", learner.peer_url)
    etcd_cluster.start_added_member(learner, etcdctl.member_list())

    def learner_status_answers() -> bool:
        try:
            [status] = EtcdProbe([learner.client_url], timeout_seconds=1.0).endpoint_status()
        except Unreachable:
            return False  # not listening yet
        return status.reachable

    wait_for(learner_status_answers, timeout=30, what="learner answers status", describe=etcd_cluster.describe)
    probe = EtcdProbe([learner.client_url, seed.client_url])
    members = probe.member_list()
    assert {m.id for m in members if m.is_learner} == {added.id}
    learner_status, seed_status = probe.endpoint_status()
    assert learner_status.is_learner and learner_status.member_id == added.id
    assert not seed_status.is_learner and learner_status.leader_id == seed_status.member_id


def test_health_checks_write_nothing_to_the_raft_log(etcd_cluster: EtcdCluster) -> None:
    # Each alarm-API call is a raft proposal (even a list): a health check per pass through it
    # would grow the log until new members get a snapshot, which costs a new 3.6 member 7 s.
    seed = etcd_cluster.start_seed()
    # etcd's own start-up writes (its attributes, then the cluster version) are not ours to count.
    wait_for(lambda: cluster_version_decided(seed.client_url), timeout=30,
             what="the cluster version decided (etcd's last start-up write)", describe=etcd_cluster.describe)
    probe = EtcdProbe([seed.client_url])
    [before] = probe.endpoint_status()
    for _ in range(20):
        assert [h.healthy for h in probe.endpoint_health()] == [True]
    [after] = probe.endpoint_status()
    assert after.raft_index == before.raft_index


def test_an_alarm_is_reported_by_status_and_leaves_the_endpoint_healthy(etcd_cluster: EtcdCluster,
                                                                          etcd_version: str) -> None:
    """NOSPACE still serves reads and keeps its quorum: the operator must tell it from a dead
    member, so health stays a linearizable read and the alarm comes with the status."""
    seed = etcd_cluster.start_seed()
    [status] = EtcdProbe([seed.client_url]).endpoint_status()
    alarm = {"memberID": str(status.member_id), "alarm": "NOSPACE"}
    post_json(seed.client_url, "/v3/maintenance/alarm", {"action": "ACTIVATE", **alarm})
    [health] = EtcdProbe([seed.client_url]).endpoint_health()
    assert health.healthy, health
    [alarmed] = EtcdProbe([seed.client_url]).endpoint_status()
    assert alarmed.alarms == (Alarm(NOSPACE, status.member_id),), alarmed
    assert alarmed.db_size_in_use > 0 and alarmed.revision > 0, alarmed
    post_json(seed.client_url, "/v3/maintenance/alarm", {"action": "DEACTIVATE", **alarm})
    [cleared] = EtcdProbe([seed.client_url]).endpoint_status()
    assert cleared.alarms == (), cleared


def test_peer_views_show_a_stopped_member_dropping_out(etcd_cluster: EtcdCluster) -> None:
    """Each member's `/metrics` names the peers it has active streams to (what the operator asks
    while members fail its health check); a stopped member drops out of the others' views."""
    members, _ = etcd_cluster.grow(3)
    probe = EtcdProbe([m.client_url for m in members], timeout_seconds=2.0)
    ids = {m.name: m.id for m in probe.member_list()}
    everyone = frozenset(ids.values())

    def all_connected() -> bool:
        views = probe.peer_views()
        return all(isinstance(v, PeerView) and v.connected == everyone - {v.member_id} for v in views)
    wait_for(all_connected, timeout=10, what="every member connected to both peers",
             describe=lambda: repr(probe.peer_views()))
    [view] = EtcdProbe([members[0].client_url]).peer_views()
    assert isinstance(view, PeerView) and view.member_id == ids["m1"]

    members[2].stop()
    live = EtcdProbe([m.client_url for m in members[:2]], timeout_seconds=2.0)
    wait_for(lambda: all(isinstance(v, PeerView) and ids["m3"] not in v.connected for v in live.peer_views()),
             timeout=10, what="m3 gone from m1's and m2's active peers", describe=lambda: repr(live.peer_views()))
    remaining = live.peer_views()
    assert [v.connected for v in remaining if isinstance(v, PeerView)] == [
        frozenset({ids["m2"]}), frozenset({ids["m1"]})]
    [stopped] = EtcdProbe([members[2].client_url], timeout_seconds=1.0).peer_views()
    assert isinstance(stopped, Unreachable)

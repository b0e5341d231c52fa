"""One pass's observation: which endpoints etcdctl is asked about, and what a pass makes of it."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from etcd_common.api.etcd_cluster import EtcdCluster
from etcd_common.etcd import types as etcd_types
from etcd_common.etcd.peer_metrics import PeerView
from etcd_operator.actions import ReportQuorumLoss
from etcd_operator.manifests import member_client_url, service_names
from etcd_operator.observing import (
    LEARNER_PROBE_TIMEOUT_SECONDS,
    NOT_LISTENING,
    PROBE_TIMEOUT_SECONDS,
    observe_cluster,
)
from etcd_operator.planning import plan_next_action
from tests.unit.etcd_operator.etcd_cluster_builders import make_cluster
from tests.unit.etcd_operator.observing_fakes import (
    CLUSTER_ID,
    FOREIGN_MEMBER,
    LIVE_POD_STATUS,
    MEMBERS,
    FakeClient,
    FakeEtcd,
    observe,
    pods,
)


def test_members_not_accepting_connections_are_never_asked_and_count_unhealthy() -> None:
    cluster = make_cluster()
    urls = {m: member_client_url(cluster, m) for m in MEMBERS}
    etcd = FakeEtcd()
    observed = observe(cluster, etcd, {urls[MEMBERS[0]], urls[MEMBERS[1]]})
    asked = {url for _, endpoints in etcd.asked for url in endpoints}
    assert urls[MEMBERS[2]] not in asked and asked == {urls[MEMBERS[0]], urls[MEMBERS[1]]}
    assert [m.member_name for m in observed.members] == list(MEMBERS)
    assert {m.member_name for m in observed.healthy_voters} == {MEMBERS[0], MEMBERS[1]}
    assert observed.has_quorum


def test_a_voter_failing_its_health_check_is_not_asked_for_its_status_too() -> None:
    cluster = make_cluster()
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    etcd = FakeEtcd()
    etcd.dying = {urls[2]}  # e.g. its pod was deleted during this pass
    observed = observe(cluster, etcd, set(urls))
    assert etcd.asked[-1] == ("endpoint status", urls[:2]), "one timeout per pass for it, not two"
    assert {m.member_name for m in observed.healthy_voters} == set(MEMBERS[:2])
    assert set(observed.endpoint_status) == set(MEMBERS[:2])


def test_a_leader_failing_its_health_check_is_asked_its_status_with_a_short_timeout() -> None:
    """A stuck leader the others still follow: whether it answers `endpoint status` tells the
    planner whether it can serve move-leader (etcd serves it on the leader only)."""
    cluster = make_cluster()
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    timeouts: list[tuple[list[str], float]] = []

    class TimingEtcd(FakeEtcd):
        def probe(self, cluster: EtcdCluster, endpoints: Sequence[str], *, timeout_seconds: float = 2.0) -> Any:
            timeouts.append((list(endpoints), timeout_seconds))
            return FakeClient(self, endpoints)
    etcd = TimingEtcd()
    etcd.dying = {urls[0]}  # every status names member 1 (MEMBERS[0]) leader
    observed = observe(cluster, etcd, set(urls))
    assert etcd.asked[-2:] == [("endpoint status", urls[1:]), ("endpoint status", urls[:1])], etcd.asked
    assert [t for endpoints, t in timeouts if endpoints == urls[:1]][-1] == LEARNER_PROBE_TIMEOUT_SECONDS
    assert LEARNER_PROBE_TIMEOUT_SECONDS < PROBE_TIMEOUT_SECONDS
    assert set(observed.endpoint_status) == set(MEMBERS) and observed.leader_id == 1
    assert {m.member_name for m in observed.healthy_voters} == set(MEMBERS[1:])


def test_a_pass_where_every_voter_is_healthy_asks_no_peer_view() -> None:
    cluster = make_cluster()
    etcd = FakeEtcd()
    observed = observe(cluster, etcd, {member_client_url(cluster, m) for m in MEMBERS})
    assert observed.has_quorum and etcd.peer_views_asked == [] and observed.peer_views == {}


def test_with_a_voter_out_of_reach_the_healthy_voters_show_whom_they_are_connected_to() -> None:
    cluster = make_cluster()
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    etcd = FakeEtcd()
    etcd.peer_views = {urls[0]: PeerView(1, frozenset({2, 3})), urls[1]: PeerView(2, frozenset({1}))}
    observed = observe(cluster, etcd, set(urls[:2]))
    assert etcd.peer_views_asked == [urls[:2]], "only the healthy voters, once"
    assert observed.peer_views == {MEMBERS[0]: frozenset({2, 3}), MEMBERS[1]: frozenset({1})}
    assert [m.member_name for m in observed.voters_seen_connected] == [MEMBERS[2]]
    assert observed.partitioned_voters == ()


def test_a_peer_view_that_fails_or_comes_from_another_member_is_left_out() -> None:
    cluster = make_cluster()
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    etcd = FakeEtcd()
    etcd.dying = {urls[2]}
    etcd.peer_views = {urls[1]: PeerView(FOREIGN_MEMBER.id, frozenset({3}))}  # urls[0]'s metrics fail
    observed = observe(cluster, etcd, set(urls))
    assert etcd.peer_views_asked == [urls[:2]]
    assert observed.peer_views == {} and observed.voters_seen_connected == ()
    assert observed.partitioned_voters == (), "an unknown peer view partitions nobody"
    assert observed.has_quorum and observed.health_error is None


def test_no_member_listening_skips_etcdctl_and_says_why() -> None:
    etcd = FakeEtcd()
    observed = observe(make_cluster(), etcd, set())
    assert etcd.asked == []
    assert observed.members is None and observed.member_list_error == NOT_LISTENING


def test_without_a_member_list_only_listening_members_give_their_status() -> None:
    cluster = make_cluster()
    etcd = FakeEtcd(member_list_error="context deadline exceeded")
    observed = observe(cluster, etcd, {member_client_url(cluster, MEMBERS[0])})
    assert etcd.asked == [("member list", [member_client_url(cluster, MEMBERS[0])]),
                          ("endpoint status", [member_client_url(cluster, MEMBERS[0])]),
                          ("local member list", [member_client_url(cluster, MEMBERS[0])])]
    assert observed.members is None and set(observed.endpoint_status) == {MEMBERS[0]}


class LearnerClient(FakeClient):
    """The last of MEMBERS is a learner."""

    def member_list(self) -> list[etcd_types.Member]:
        return [dataclasses.replace(m, is_learner=m.name == MEMBERS[2]) for m in super().member_list()]


class LearnerEtcd(FakeEtcd):
    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float] = []

    def probe(self, cluster: EtcdCluster, endpoints: Sequence[str], *, timeout_seconds: float = 2.0) -> Any:
        self.timeouts.append(timeout_seconds)
        return LearnerClient(self, endpoints)


def test_a_learner_is_asked_only_its_status_with_a_short_timeout() -> None:
    # A joining etcd 3.6 learner may answer nothing for seconds: the usual timeout would stall passes.
    cluster = make_cluster()
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    etcd = LearnerEtcd()
    observed = observe(cluster, etcd, set(urls))
    assert [q for q in etcd.asked if q[0] != "member list"] == [
        ("endpoint health", urls[:2]), ("endpoint status", urls[:2]), ("endpoint status", urls[2:])]
    assert etcd.timeouts[-1] == LEARNER_PROBE_TIMEOUT_SECONDS < PROBE_TIMEOUT_SECONDS
    assert [m.member_name for m in observed.learners] == [MEMBERS[2]]
    assert MEMBERS[2] in observed.endpoint_status and MEMBERS[2] not in observed.health


def test_the_member_list_is_asked_of_ready_pods_first() -> None:
    cluster = make_cluster()
    raw = pods(cluster)
    raw[0] = {**raw[0], "status": {**LIVE_POD_STATUS, "conditions": [{"type": "Ready", "status": "False"}]}}
    urls = [member_client_url(cluster, m) for m in MEMBERS]
    etcd = FakeEtcd()
    observe_cluster(cluster, pods=raw, services=[], pvcs=[], etcd=etcd,  # type: ignore[arg-type]
                    connectable=lambda asked: set(asked))
    assert etcd.asked[0] == ("member list", [urls[1], urls[2], urls[0]])


def test_health_and_status_answers_are_checked_against_the_member_lists_cluster_id() -> None:
    """The member list defines the cluster; every health and status question carries its ID, so an
    answer from another etcd cluster (a reused name or address) is ignored (etcd_common.etcd.probe)."""
    cluster = make_cluster()
    etcd = LearnerEtcd()
    observed = observe(cluster, etcd, {member_client_url(cluster, m) for m in MEMBERS})
    assert observed.cluster_id == CLUSTER_ID
    assert etcd.expected_cluster_ids == [CLUSTER_ID] * 3, etcd.expected_cluster_ids


def test_a_member_list_answered_by_another_clusters_member_is_not_taken() -> None:
    """A pod's address or DNS name reaching another etcd cluster's member (reused): its member list
    would define this cluster (its members removed, others added); the next pod's member answers."""
    cluster = make_cluster()
    etcd = FakeEtcd()
    etcd.foreign = {member_client_url(cluster, MEMBERS[0])}
    observed = observe(cluster, etcd, {member_client_url(cluster, m) for m in MEMBERS})
    assert observed.cluster_id == CLUSTER_ID
    assert sorted(m.name for m in observed.members) == list(MEMBERS)


def test_without_a_member_list_another_clusters_leaderless_member_is_not_this_clusters() -> None:
    """Rule 5's quorum-loss evidence (members answering `endpoint status` without a leader) counts
    only members whose own member list names them as their pod's member."""
    cluster = make_cluster()
    etcd = FakeEtcd(member_list_error="context deadline exceeded")
    etcd.leader_id = 0
    etcd.foreign = {member_client_url(cluster, MEMBERS[1])}
    observed = observe(cluster, etcd, {member_client_url(cluster, m) for m in MEMBERS})
    assert set(observed.endpoint_status) == {MEMBERS[0], MEMBERS[2]}
    assert observed.leaderless_answers == (MEMBERS[0], MEMBERS[2])


def test_only_another_clusters_leaderless_members_answering_is_no_quorum_loss() -> None:
    cluster = make_cluster()
    etcd = FakeEtcd(member_list_error="context deadline exceeded")
    etcd.leader_id = 0
    etcd.foreign = {member_client_url(cluster, m) for m in MEMBERS}
    observed = observe(cluster, etcd, set(etcd.foreign))
    assert observed.endpoint_status == {} and observed.leaderless_answers == ()
    action = plan_next_action(dataclasses.replace(observed, services=frozenset(service_names(cluster.name))))
    assert not isinstance(action, ReportQuorumLoss), action


def test_while_a_pod_serves_plaintext_a_move_to_tls_asks_every_member_over_http() -> None:
    """Step 1 of a move to TLS (tls_transition.py): the pods still serve plaintext, so the pass
    reaches them on http and builds bridge pods, though the spec asks for TLS."""
    plain = make_cluster()
    issued = make_cluster({"TLS": {"issued": {}}})
    etcd = FakeEtcd()
    observed = observe_cluster(issued, pods=pods(plain), services=[], pvcs=[], etcd=etcd,  # type: ignore[arg-type]
                               connectable=lambda urls: set(urls))
    assert observed.cluster.require_spec().tls_bridge is True
    asked = {url for _, endpoints in etcd.asked for url in endpoints}
    assert asked and all(url.startswith("http://") for url in asked), asked
    assert [m.member_name for m in observed.healthy_voters] == list(MEMBERS)

    etcd = FakeEtcd()
    done = observe_cluster(issued, pods=pods(issued), services=[], pvcs=[], etcd=etcd,  # type: ignore[arg-type]
                           connectable=lambda urls: set(urls))
    assert done.cluster.require_spec().tls_bridge is False
    assert all(url.startswith("https://") for _, endpoints in etcd.asked for url in endpoints), etcd.asked

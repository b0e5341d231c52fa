"""The HTTP probe's parsing of etcd's gRPC-gateway JSON (captured from etcd 3.6.16): uint64 fields
come as strings and zero values are left out."""
from __future__ import annotations

import json
from typing import Any

import pytest

from etcd_common.etcd.etcdctl import EtcdctlError, Unreachable, parse_hash_kv_answer, parse_member
from etcd_common.etcd.probe import MEMBER_LIST_PATH, RANGE_PATH, STATUS_PATH, EtcdProbe, parse_status
from etcd_common.etcd.types import HashKV, MemberList

STATUS = json.loads(
    '{"header":{"cluster_id":"12558503185269689621","member_id":"3335757982543269782","revision":"1",'
    '"raft_term":"2"},"version":"3.6.16","dbSize":"20480","leader":"3335757982543269782","raftIndex":"4",'
    '"raftTerm":"2","raftAppliedIndex":"4","dbSizeInUse":"16384","storageVersion":"3.6.0",'
    '"dbSizeQuota":"2147483648","downgradeInfo":{}}')
MEMBER = json.loads(
    '{"ID":"3335757982543269782","name":"a","peerURLs":["http://127.7.250.1:2380"],'
    '"clientURLs":["http://127.7.250.1:2379"],"isLearner":true}')


def test_status_fields_from_strings() -> None:
    status = parse_status("http://a:2379", STATUS)
    assert (status.member_id, status.leader_id, status.raft_index, status.raft_term, status.db_size) == (
        3335757982543269782, 3335757982543269782, 4, 2, 20480)
    assert status.version == "3.6.16" and status.is_leader and not status.is_learner and status.errors == ()
    assert status.endpoint == "http://a:2379"


def test_status_of_a_member_without_leader_has_zero_leader() -> None:
    leaderless = {k: v for k, v in STATUS.items() if k != "leader"}
    status = parse_status("http://a:2379", leaderless)
    assert status.leader_id == 0 and status.reachable and not status.is_leader


def test_member_from_gateway_json() -> None:
    member = parse_member(MEMBER)
    assert member.id == 3335757982543269782 and member.is_learner and member.started
    assert member.client_urls == ("http://127.7.250.1:2379",)


# Recorded from etcd 3.6.16's gateway: two single-member clusters, ours (12558503185269689621) and
# another one that took over an address ours used (9372538179322589801).
OURS, OTHERS = 12558503185269689621, 9372538179322589801
MEMBER_LIST = json.loads(
    '{"header":{"cluster_id":"12558503185269689621","member_id":"3335757982543269782","raft_term":"2"},'
    '"members":[{"ID":"3335757982543269782","name":"a","peerURLs":["http://127.7.250.1:2380"],'
    '"clientURLs":["http://127.7.250.1:2379"]}]}')
OTHER_STATUS = json.loads(
    '{"header":{"cluster_id":"9372538179322589801","member_id":"10501334649042878790","revision":"1",'
    '"raft_term":"2"},"version":"3.6.16","dbSize":"20480","leader":"10501334649042878790","raftIndex":"4",'
    '"raftTerm":"2","raftAppliedIndex":"4","dbSizeInUse":"16384","storageVersion":"3.6.0",'
    '"dbSizeQuota":"2147483648","downgradeInfo":{}}')
HEALTH_READ = json.loads(
    '{"header":{"cluster_id":"12558503185269689621","member_id":"3335757982543269782","revision":"1",'
    '"raft_term":"2"}}')
OTHER_HEALTH_READ = json.loads(
    '{"header":{"cluster_id":"9372538179322589801","member_id":"10501334649042878790","revision":"1",'
    '"raft_term":"2"}}')


class RecordedProbe(EtcdProbe):
    """Answers each endpoint's request with recorded gateway JSON (an exception: raised)."""

    def __init__(self, answers: dict[tuple[str, str], Any]) -> None:
        super().__init__(sorted({endpoint for endpoint, _ in answers}))
        self.answers = answers

    def _request(self, endpoint: str, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        answer = self.answers[endpoint, path]
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)


def test_the_member_list_gives_the_cluster_id() -> None:
    answer = RecordedProbe({("http://a:2379", MEMBER_LIST_PATH): MEMBER_LIST}).cluster_members()
    assert answer.cluster_id == OURS and [m.name for m in answer.members] == ["a"]
    assert parse_status("http://a:2379", STATUS).cluster_id == OURS


def test_a_status_answered_for_another_cluster_counts_as_unreachable() -> None:
    probe = RecordedProbe({("http://a:2379", STATUS_PATH): STATUS, ("http://b:2379", STATUS_PATH): OTHER_STATUS})
    ours, other = probe.endpoint_status(OURS)
    assert ours.reachable and ours.cluster_id == OURS
    assert not other.reachable
    assert other.errors == (f"http://b:2379: answers for etcd cluster {OTHERS:x}, not this cluster's {OURS:x}",)
    assert all(s.reachable for s in probe.endpoint_status()), "without a cluster ID, any answer counts"


def test_a_health_read_answered_for_another_cluster_is_unhealthy() -> None:
    probe = RecordedProbe({("http://a:2379", RANGE_PATH): HEALTH_READ, ("http://b:2379", RANGE_PATH): OTHER_HEALTH_READ,
                           ("http://c:2379", RANGE_PATH): Unreachable("Error: context deadline exceeded")})
    ours, other, dead = probe.endpoint_health(OURS)
    assert ours.healthy and ours.cluster_id == OURS and ours.error == ""
    assert not other.healthy and other.error == f"answers for etcd cluster {OTHERS:x}, not this cluster's {OURS:x}"
    assert not dead.healthy and "deadline" in dead.error


OTHER_MEMBER_LIST = json.loads(
    '{"header":{"cluster_id":"9372538179322589801","member_id":"10501334649042878790","raft_term":"2"},'
    '"members":[{"ID":"10501334649042878790","name":"z","peerURLs":["http://127.7.250.1:2380"],'
    '"clientURLs":["http://127.7.250.1:2379"]}]}')


def test_the_member_list_says_which_member_answered() -> None:
    answer = RecordedProbe({("http://a:2379", MEMBER_LIST_PATH): MEMBER_LIST}).cluster_members()
    assert answer.member_id == 3335757982543269782
    assert answer.responder is not None and answer.responder.name == "a"


def test_a_member_list_its_check_refuses_is_skipped_for_the_next_endpoint() -> None:
    """Another cluster's member at an address ours used answers first: its list is not taken."""
    probe = RecordedProbe({("http://a:2379", MEMBER_LIST_PATH): OTHER_MEMBER_LIST,
                           ("http://b:2379", MEMBER_LIST_PATH): MEMBER_LIST})
    answer = probe.cluster_members(lambda _url, got: None if got.cluster_id == OURS else "another cluster")
    assert answer.cluster_id == OURS
    with pytest.raises(EtcdctlError, match="http://b:2379: no"):
        probe.cluster_members(lambda _url, _got: "no")


def test_local_member_lists_ask_each_endpoint_for_its_own_view() -> None:
    probe = RecordedProbe({("http://a:2379", MEMBER_LIST_PATH): MEMBER_LIST,
                           ("http://b:2379", MEMBER_LIST_PATH): Unreachable("Error: connection refused")})
    ours, failed = probe.local_member_lists()
    assert isinstance(ours, MemberList) and ours.responder is not None and ours.responder.name == "a"
    assert isinstance(failed, EtcdctlError)


@pytest.mark.parametrize(("document", "expected"), [
    # etcd 3.6: the revision hashed is in the answer (uint32 hash as a number, int64s as strings).
    ({"header": {"revision": "9"}, "hash": 3628877040, "compact_revision": "-1", "hash_revision": "2"},
     HashKV(3628877040, -1, 2)),
    # etcd 3.5 leaves hash_revision out: it is the revision asked.
    ({"header": {"revision": "9"}, "hash": 3628877040, "compact_revision": "4"}, HashKV(3628877040, 4, 7)),
])
def test_the_gateways_hashkv_answer_is_parsed(document: dict[str, Any], expected: HashKV) -> None:
    assert parse_hash_kv_answer(document, 7) == expected

"""The HTTP probe's parsing of etcd's gRPC-gateway JSON (captured from etcd 3.6.16): uint64 fields
come as strings and zero values are left out."""
from __future__ import annotations

import json

from etcd_common.etcd.etcdctl import parse_member
from etcd_common.etcd.probe import parse_status

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

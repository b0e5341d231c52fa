"""etcdctl output parsing and error classification, on output captured from etcdctl 3.5.1 and
3.4.23 against real servers."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from etcd_common.etcd import etcdctl as etcdctl_module
from etcd_common.etcd.etcdctl import (
    ClusterUnhealthy,
    Etcdctl,
    EtcdctlError,
    LeaderChanged,
    LearnerNotReady,
    MemberNotFound,
    MemberNotLearner,
    NoLeader,
    NotLeader,
    PeerURLExists,
    SnapshotInvalid,
    TooManyLearners,
    Unreachable,
    classify_error,
    crashed,
    error_message,
    foreign_cluster_error,
    parse_endpoint_health,
    parse_endpoint_status,
    parse_get_value,
    parse_hash_kv,
    parse_key_count,
    parse_member_add,
    parse_member_list,
    parse_member_list_answer,
)
from etcd_common.etcd.etcdutl import snapshot_status
from etcd_common.etcd.types import ClientTLS, EndpointHealth, HashKV, Member, format_member_id, member_name_from_peer_url

MEMBER_LIST = (
    '{"header":{"cluster_id":13093942152944664293,"member_id":2180634902841419461,"raft_term":2},'
    '"members":[{"ID":2180634902841419461,"name":"m1","peerURLs":["http://127.0.50.1:23801"],'
    '"clientURLs":["http://127.0.50.1:23791"]},'
    '{"ID":5283136511451488434,"peerURLs":["http://127.0.50.2:23801"],"isLearner":true}]}'
)
MEMBER_ADD = (
    '{"header":{"cluster_id":13093942152944664293,"member_id":2180634902841419461,"raft_term":2},'
    '"member":{"ID":5283136511451488434,"peerURLs":["http://127.0.50.2:23801"],"isLearner":true},'
    '"members":[{"ID":2180634902841419461,"name":"m1","peerURLs":["http://127.0.50.1:23801"],'
    '"clientURLs":["http://127.0.50.1:23791"]},'
    '{"ID":5283136511451488434,"peerURLs":["http://127.0.50.2:23801"],"isLearner":true}]}'
)
ENDPOINT_STATUS = (
    '[{"Endpoint":"http://127.0.50.1:23791","Status":{"header":{"cluster_id":13093942152944664293,'
    '"member_id":2180634902841419461,"revision":1,"raft_term":2},"version":"3.5.1","dbSize":20480,'
    '"leader":2180634902841419461,"raftIndex":5,"raftTerm":2,"raftAppliedIndex":5,"dbSizeInUse":16384}}]'
)
ENDPOINT_HEALTH_MIXED = (
    '[{"endpoint":"http://127.0.50.1:23791","health":true,"took":"2.242365ms"},'
    '{"endpoint":"http://127.0.50.9:23791","health":false,"took":"2.000924968s","error":"context deadline exceeded"}]'
)
RETRY_WARNING = (
    '{"level":"warn","ts":"2026-11-22T02:51:39.196Z","logger":"etcd-client",'
    '"caller":"v3/retry_interceptor.go:62","msg":"retrying of unary invoker failed",'
    '"target":"etcd-endpoints://0xc0002ee700/127.0.50.1:23791","attempt":0,'
    '"error":"rpc error: code = FailedPrecondition desc = etcdserver: too many learner members in cluster"}'
)


def test_member_list_keeps_unstarted_learners() -> None:
    started, learner = parse_member_list(MEMBER_LIST)
    assert started == Member(
        id=2180634902841419461,
        name="m1",
        peer_urls=("http://127.0.50.1:23801",),
        client_urls=("http://127.0.50.1:23791",),
        is_learner=False,
    )
    assert started.started and started.hex_id == "1e432be400ae66c5"
    assert learner.is_learner and learner.name == "" and not learner.started


def test_member_list_of_an_empty_answer_is_empty() -> None:
    assert parse_member_list('{"header":{}}') == []


def test_member_add_returns_the_new_member() -> None:
    member = parse_member_add(MEMBER_ADD)
    assert (member.id, member.is_learner, member.peer_urls) == (5283136511451488434, True, ("http://127.0.50.2:23801",))
    assert format_member_id(member.id) == "495178aa78f660b2"


def test_endpoint_status_fields() -> None:
    [status] = parse_endpoint_status(ENDPOINT_STATUS)
    assert status.endpoint == "http://127.0.50.1:23791"
    assert status.member_id == status.leader_id == 2180634902841419461
    assert (status.version, status.raft_index, status.raft_term, status.db_size) == ("3.5.1", 5, 2, 20480)
    assert status.reachable and status.is_leader and not status.is_learner and status.errors == ()


def test_endpoint_status_revision_from_its_header() -> None:
    [status] = parse_endpoint_status(ENDPOINT_STATUS)
    assert status.revision == 1


def test_member_list_and_status_carry_the_cluster_id_of_their_header() -> None:
    answer = parse_member_list_answer(json.loads(MEMBER_LIST))
    assert answer.cluster_id == 13093942152944664293 and [m.name for m in answer.members] == ["m1", ""]
    [status] = parse_endpoint_status(ENDPOINT_STATUS)
    assert status.cluster_id == 13093942152944664293


def test_an_answer_for_another_cluster_is_named_with_both_ids() -> None:
    assert foreign_cluster_error(0x1234, 0xABCD) == "answers for etcd cluster 1234, not this cluster's abcd"
    assert foreign_cluster_error(0x1234, 0x1234) is None
    assert foreign_cluster_error(0, 0xABCD) is None and foreign_cluster_error(0x1234, 0) is None, "unknown: no verdict"


def test_endpoint_status_of_a_failed_endpoint_is_an_empty_list() -> None:
    assert parse_endpoint_status("[]") == []


def test_endpoint_health_reports_every_endpoint() -> None:
    assert parse_endpoint_health(ENDPOINT_HEALTH_MIXED) == [
        EndpointHealth("http://127.0.50.1:23791", True, ""),
        EndpointHealth("http://127.0.50.9:23791", False, "context deadline exceeded"),
    ]


def test_get_decodes_base64_values() -> None:
    found = '{"header":{},"kvs":[{"key":"LWs=","create_revision":2,"mod_revision":2,"version":1,"value":"LXY="}],"count":1}'
    assert parse_get_value(found) == "-v"
    assert parse_get_value('{"header":{"revision":2}}') is None


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (RETRY_WARNING + "\nError: etcdserver: too many learner members in cluster", TooManyLearners),
        ("Error: etcdserver: unhealthy cluster", ClusterUnhealthy),
        ("Error: unhealthy cluster", ClusterUnhealthy),
        ("Error: etcdserver: re-configuration failed due to not enough started members", ClusterUnhealthy),
        ("Error: etcdserver: no leader", NoLeader),
        ("Error: etcdserver: member not found", MemberNotFound),
        ("Error: etcdserver: Peer URLs already exists", PeerURLExists),
        ("Error: etcdserver: member ID already exist", PeerURLExists),
        ("Error: etcdserver: can only promote a learner member which is in sync with leader", LearnerNotReady),
        ("Error: etcdserver: can only promote a learner member", MemberNotLearner),
        ("Error: etcdserver: not leader", NotLeader),
        ("Error: etcdserver: leader changed", LeaderChanged),
        ("Error: context deadline exceeded", Unreachable),
        ("Error: etcdserver: request timed out, possibly due to connection lost", Unreachable),
        ("Failed to get the status of endpoint http://127.0.50.9:23791 (context deadline exceeded)", Unreachable),
        (
            '{"level":"warn","msg":"retrying","error":"rpc error: code = Unavailable desc = connection refused"}\n'
            "Error: some new wording",
            Unreachable,
        ),
        ("Error: etcdserver: bad leader transferee", EtcdctlError),
        ("", EtcdctlError),
    ],
)
def test_errors_map_to_classes(stderr: str, expected: type[EtcdctlError]) -> None:
    error = classify_error(stderr, command=["etcdctl", "member", "add"])
    assert type(error) is expected
    assert error.stderr == stderr and error.command == ("etcdctl", "member", "add")


def test_error_message_prefers_the_error_line_over_retry_warnings() -> None:
    stderr = RETRY_WARNING + "\nError: etcdserver: too many learner members in cluster\n"
    assert error_message(stderr) == "etcdserver: too many learner members in cluster"


def test_a_crash_is_named_as_such() -> None:
    stderr = (
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x78 pc=0xcaa212]\n\ngoroutine 1 [running]:\n"
        "main.main()\n\t/tmp/etcd-release-3.5.1/etcd/release/etcd/etcdctl/main.go:59 +0x77\n"
    )
    error = classify_error(stderr)
    assert type(error) is EtcdctlError
    assert str(error).startswith("etcdctl crashed: panic: runtime error")


def test_command_line_carries_timeouts_output_and_tls() -> None:
    etcdctl = Etcdctl(
        ["https://a:2379", "https://b:2379", "https://a:2379"],
        binary="/bin/etcdctl",
        tls=ClientTLS(ca_file="/tls/ca.crt", cert_file="/tls/client.crt", key_file="/tls/client.key"),
        dial_timeout_seconds=1.5,
        command_timeout_seconds=4,
    )
    assert etcdctl.command_line(["member", "list"]) == [
        "/bin/etcdctl",
        "--endpoints", "https://a:2379,https://b:2379",
        "--dial-timeout", "1500ms",
        "--command-timeout", "4000ms",
        "--write-out", "json",
        "--cacert", "/tls/ca.crt", "--cert", "/tls/client.crt", "--key", "/tls/client.key",
        "member", "list",
    ]
    assert etcdctl.command_line(["put", "--", "k", "v"], ["https://b:2379"], output="simple")[1:3] == [
        "--endpoints", "https://b:2379",
    ]


def test_endpoints_must_be_a_list() -> None:
    with pytest.raises(TypeError):
        Etcdctl("http://a:2379")
    with pytest.raises(ValueError):
        Etcdctl([])


def test_binary_comes_from_the_environment_then_beside_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETCDCTL_BINARY", "/opt/etcd/etcdctl")
    assert etcdctl_module.default_binary() == "/opt/etcd/etcdctl"
    monkeypatch.delenv("ETCDCTL_BINARY")
    beside_python = os.path.join(os.path.dirname(sys.executable), "etcdctl")
    if os.access(beside_python, os.X_OK):
        assert etcdctl_module.default_binary() == beside_python


def test_stray_etcdctl_environment_is_not_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETCDCTL_ENDPOINTS", "http://elsewhere:2379")
    monkeypatch.setenv("ETCDCTL_API", "2")
    environment = etcdctl_module._etcdctl_environment()
    assert "ETCDCTL_ENDPOINTS" not in environment and environment["ETCDCTL_API"] == "3"


def test_a_missing_binary_is_a_clear_error() -> None:
    with pytest.raises(EtcdctlError, match="cannot run etcdctl"):
        Etcdctl(["http://127.0.0.1:1"], binary="/nonexistent/etcdctl").member_list()


# Captured from `etcdutl snapshot status -w json`: 3.6.16 on a 3.6 snapshot, 3.5.35 (no version field).
@pytest.mark.parametrize("output, storage_version, keys", [
    ('{"hash":1910731920,"revision":2,"totalKey":1,"totalSize":20480,"version":"3.6.0"}', "3.6.0", 1),
    ('{"hash":1910731920,"revision":2,"totalKey":5,"totalSize":20480}', "", 5),
])
def test_parse_snapshot_status(output: str, storage_version: str, keys: int) -> None:
    status = etcdctl_module.parse_snapshot_status(output)
    assert (status.hash, status.revision, status.total_size) == (1910731920, 2, 20480)
    assert (status.total_keys, status.storage_version) == (keys, storage_version)


@pytest.mark.parametrize("stderr", [
    "Error: invalid database",
    "Error: snapshot file integrity check failed. 2 errors found.",
    "Error: snapshot missing hash but --skip-hash-check=false",
])
def test_broken_snapshot_errors(stderr: str) -> None:
    assert isinstance(classify_error(stderr), etcdctl_module.SnapshotInvalid)


def test_snapshot_save_needs_one_endpoint() -> None:
    with pytest.raises(ValueError, match="one endpoint"):
        Etcdctl(["http://127.0.0.1:1", "http://127.0.0.2:1"], binary="/bin/false").snapshot_save("/nonexistent")


# What etcdutl 3.6.16 printed for `snapshot status` of a real snapshot cut short (two cut points).
ETCDUTL_SIGBUS = (
    "unexpected fault address 0x7f83dd713000\nfatal error: fault\n"
    "[signal SIGBUS: bus error code=0x2 addr=0x7f83dd713000 pc=0xa10f2a]\n\n"
    "goroutine 1 gp=0x2fabc4602000 m=0 mp=0x1c7a2e0 [running]:\nruntime.throw({0xc8f0a3?, 0x0?})\n"
    "\truntime/panic.go:1229 +0x48\ngo.etcd.io/bbolt@v1.4.3/db.go:1246 +0x1ef\n"
)
ETCDUTL_ASSERTION = (
    "panic: assertion failed: Page expected to be: 51, but self identifies as 0\n\n"
    "goroutine 110 [running]:\ngo.etcd.io/bbolt/internal/common.Assert(...)\n"
    "\tgo.etcd.io/bbolt@v1.4.3/internal/common/verify.go:65\n"
)


def test_a_fatal_signal_is_named_with_its_signal_not_the_last_stack_line() -> None:
    error = classify_error(ETCDUTL_SIGBUS, command=("/usr/bin/etcdutl", "snapshot", "status", "x.db"))
    assert str(error) == ("etcdutl crashed: fatal error: fault "
                          "[signal SIGBUS: bus error code=0x2 addr=0x7f83dd713000 pc=0xa10f2a]")
    assert crashed(ETCDUTL_SIGBUS) and crashed(ETCDUTL_ASSERTION)
    assert not crashed(RETRY_WARNING + "\nError: etcdserver: too many learner members in cluster\n")


def test_etcdutl_crashing_on_a_snapshot_is_an_invalid_snapshot(tmp_path: Path) -> None:
    for stderr in (ETCDUTL_SIGBUS, ETCDUTL_ASSERTION):
        fake = tmp_path / "etcdutl"
        (tmp_path / "stderr.txt").write_text(stderr)
        fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'stderr.txt'} >&2\nexit 2\n")
        fake.chmod(0o755)
        with pytest.raises(SnapshotInvalid, match="not a readable etcd database: etcdutl crashed"):
            snapshot_status(str(tmp_path / "snap.db"), binary=str(fake))


@pytest.mark.parametrize("url, member", [
    ("http://example-abcde.example.default.svc:2380", "example-abcde"),
    ("https://example-abcde.example.ns.svc.cluster.local:2380", "example-abcde"),
    ("http://127.1.0.4:2380", None),
    ("http://[::1]:2380", None),
    ("", None),
])
def test_member_name_from_peer_url(url: str, member: str | None) -> None:
    assert member_name_from_peer_url(url) == member


def test_key_count_and_hash_kv_as_etcdctl_3_6_prints_them() -> None:
    """`get --prefix --keys-only --limit=1 -w json` (count absent when zero) and `endpoint hashkv
    --rev -w json`, as captured from etcdctl 3.6.16."""
    assert parse_key_count('{"header":{"revision":5},"kvs":[{"key":"azE="}],"more":true,"count":3}') == 3
    assert parse_key_count('{"header":{"revision":6}}') == 0
    answer = ('[{"Endpoint":"http://127.0.0.1:24379","HashKV":{"header":{"revision":5},"hash":4178063679,'
              '"compact_revision":3,"hash_revision":4}}]')
    assert parse_hash_kv(answer) == HashKV(hash=4178063679, compact_revision=3, hash_revision=4)
    with pytest.raises(ValueError):
        parse_hash_kv("[]")

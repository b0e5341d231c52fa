"""Specs the operator cannot act on get a reason (and the one-shot command builds its request from a
template plus flags)."""
from __future__ import annotations

from typing import Any

import pytest

from backup_operator import reasons
from backup_operator.oneshot import build_parser, build_request
from backup_operator.planning import spec_problem
from backup_operator.reasons import BackupFailed
from etcd_common.api.etcd_backup import parse_etcd_backup
from etcd_common.api.storage_locations import EncryptionKeyRef
from tests.unit.backup_operator.etcd_backup_builders import raw_backup


def backup(spec: Any) -> dict[str, Any]:
    return raw_backup(spec)


S3 = {"path": "bucket/key", "awsSecret": "aws"}


@pytest.mark.parametrize("spec, reason, fragment", [
    (None, reasons.INVALID_SPEC, "spec is required"),
    ({"storageType": "S3"}, reasons.INVALID_SPEC, "spec.s3 is missing"),
    ({"storageType": "S3", "s3": S3}, reasons.INVALID_SPEC, "etcdEndpoints or spec.etcdCluster.name"),
    ({"storageType": "S3", "s3": S3, "etcdEndpoints": ["http://e-client.ns.svc:2379"], "etcdCluster": {"name": "example"}},
     reasons.INVALID_SPEC, "mutually exclusive"),
    ({"storageType": "GCS", "gcs": {"path": "b/k"}}, reasons.INVALID_SPEC, "etcdEndpoints or spec.etcdCluster.name"),
    ({"storageType": "ABS", "s3": S3, "etcdEndpoints": ["http://e-client.ns.svc:2379"]},
     reasons.INVALID_SPEC, "spec.abs is missing"),
    ({"storageType": "S3", "s3": S3, "etcdCluster": {}}, reasons.INVALID_SPEC, "spec.etcdCluster.name is required"),
])
def test_specs_that_cannot_be_acted_on(spec: Any, reason: str, fragment: str) -> None:
    problem = spec_problem(parse_etcd_backup(backup(spec)))
    assert problem is not None and problem[0] == reason and fragment in problem[1], problem


@pytest.mark.parametrize("spec", [
    {"storageType": "S3", "s3": S3, "etcdEndpoints": ["http://e-client.ns.svc:2379"]},
    {"storageType": "S3", "s3": S3, "etcdCluster": {"name": "example"}},
    {"storageType": "ABS", "abs": {"path": "container/key", "absSecret": "azure"}, "etcdCluster": {"name": "example"}},
    {"storageType": "GCS", "gcs": {"path": "bucket/key"}, "etcdCluster": {"name": "example"}},
    {"storageType": "OSS", "oss": {"path": "bucket/key", "ossSecret": "ali", "endpoint": "oss-cn-beijing.aliyuncs.com"},
     "etcdCluster": {"name": "example"}},
])
def test_good_specs_have_no_problem(spec: Any) -> None:
    parsed = parse_etcd_backup(backup(spec))
    assert spec_problem(parsed) is None
    assert parsed.spec is not None and parsed.spec.etcd_cluster_name in ("", "example")


def test_one_shot_command_lays_flags_over_a_template() -> None:
    template = backup({"storageType": "S3", "s3": {**S3, "endpoint": "http://127.0.0.1:9000"},
                       "etcdCluster": {"name": "example"}, "backupPolicy": {"maxBackups": 4, "timeoutInSecond": 60}})
    args = build_parser().parse_args(["--namespace", "ns", "--from-backup", "b", "--max-backups", "2"])
    request = build_request(args, template)
    assert (request.etcd_cluster_name, request.location.path, request.location.endpoint) == (
        "example", "bucket/key", "http://127.0.0.1:9000")
    assert (request.max_backups, request.periodic, request.timeout_seconds) == (2, True, 60)


def test_one_shot_command_from_flags_only() -> None:
    args = build_parser().parse_args(["--namespace", "ns", "--endpoints", "http://a:2379,http://b:2379",
                                      "--s3-path", "b/k", "--exact-key"])
    request = build_request(args, None)
    assert request.endpoints == ("http://a:2379", "http://b:2379") and not request.periodic


@pytest.mark.parametrize("argv", [["--s3-path", "b/k"], ["--etcd-cluster", "c"]])
def test_one_shot_command_needs_a_source_and_a_destination(argv: list[str]) -> None:
    with pytest.raises(BackupFailed) as failed:
        build_request(build_parser().parse_args(argv), None)
    assert failed.value.reason == reasons.INVALID_SPEC


def test_one_shot_command_on_another_store() -> None:
    template = backup({"storageType": "S3", "s3": S3, "etcdCluster": {"name": "example"}})
    args = build_parser().parse_args(["--namespace", "ns", "--from-backup", "b", "--abs-path", "container/etcd",
                                      "--abs-secret", "azure", "--abs-endpoint", "http://127.0.0.1:10000/acct"])
    request = build_request(args, template)
    assert request.location.storage_type == "ABS" and request.location.s3 is None
    assert (request.location.path, request.location.secret, request.location.endpoint) == (
        "container/etcd", "azure", "http://127.0.0.1:10000/acct")
    gcs_template = backup({"storageType": "GCS", "gcs": {"path": "b/k", "gcpSecret": "gcp"},
                           "etcdCluster": {"name": "example"}})
    request = build_request(build_parser().parse_args(["--from-backup", "b", "--gcs-path", "b/other"]), gcs_template)
    assert (request.location.storage_type, request.location.path, request.location.secret) == ("GCS", "b/other", "gcp")
    with pytest.raises(BackupFailed, match="only one of --s3-path, --oss-path"):
        build_request(build_parser().parse_args(["--s3-path", "b/k", "--oss-path", "b/k", "--etcd-cluster", "c"]),
                      None)


def test_one_shot_command_encodes_as_the_template_or_its_flags_say() -> None:
    template = backup({"storageType": "S3", "s3": S3, "etcdCluster": {"name": "example"}, "compression": "Gzip",
                       "encryption": {"secretName": "template-key", "secretKey": "aes"}})
    inherited = build_request(build_parser().parse_args(["--namespace", "ns", "--from-backup", "b"]), template)
    assert (inherited.compression, inherited.encryption) == ("Gzip", EncryptionKeyRef("template-key", "aes"))
    overridden = build_request(build_parser().parse_args(
        ["--namespace", "ns", "--from-backup", "b", "--compression", "None", "--encryption-secret", "k"]), template)
    assert (overridden.compression, overridden.encryption) == ("None", EncryptionKeyRef("k", "key"))
    plain = build_request(build_parser().parse_args(["--namespace", "ns", "--endpoints", "http://a:2379",
                                                     "--s3-path", "b/k"]), None)
    assert (plain.compression, plain.encryption) == ("None", None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--compression", "Zstd"])

"""Which etcd and S3 endpoints an EtcdBackup may name: the URL checks, the planner's refusal
before anything is read, the flags, and the awsSecret's S3 endpoint checked before any request."""
from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from backup_operator import reasons
from backup_operator.actions import RejectSpec, TakeBackup
from backup_operator.endpoint_policy import (
    CROSS_NAMESPACE_FLAG,
    ENDPOINT_HOSTS_FLAG,
    S3_ENDPOINT_HOSTS_FLAG,
    EndpointPolicy,
    etcd_endpoint_refusal,
    s3_endpoint_refusal,
)
from backup_operator.observed import ObservedBackup, RecordedBackup
from backup_operator.planning import plan_next_action
from backup_operator.reasons import BackupFailed
from backup_operator.settings import parse_settings
from backup_operator.taking import BackupEnvironment, BackupRequest, take_backup
from etcd_common.api.storage_locations import S3Location, StorageLocation
from etcd_common.storage import s3
from tests.unit.backup_operator.etcd_backup_builders import observed_backup
from tests.unit.backup_operator.storage_fakes import FakeStorage

NOW_TIME = datetime(2026, 1, 2, tzinfo=UTC)
OWN = EndpointPolicy()
CROSS = EndpointPolicy(allow_cross_namespace=True)
LISTED = EndpointPolicy(allowed_hosts=("*.etcd.example.com", "10.0.0.5", "etcd-*.shared.svc"))


@pytest.mark.parametrize("url, policy, allowed", [
    # The EtcdBackup's own namespace ("a"): services and pods, short or with the cluster domain.
    ("http://c-client.a.svc:2379", OWN, True),
    ("https://c-client.a.svc.cluster.local:2379", OWN, True),
    ("http://c-0.c.a.svc:2379", OWN, True),
    ("HTTP://C-Client.A.SVC:2379", OWN, True),
    ("http://c-client.a.svc.:2379", OWN, True),
    # Another namespace, however it is spelled.
    ("http://c-client.b.svc:2379", OWN, False),
    ("http://c-client.b.svc.cluster.local:2379", OWN, False),
    ("http://c-client.a.b.svc:2379", OWN, False),
    ("http://c-client.a.svc.evil.example.com:2379", OWN, False),  # a DNS name outside the cluster
    ("http://a.svc:2379", OWN, False),
    ("http://c-client:2379", OWN, False),  # resolved in the operator's namespace, not the EtcdBackup's
    ("http://127.0.0.1:2379", OWN, False),
    ("http://[::1]:2379", OWN, False),
    ("http://2130706433:2379", OWN, False),
    ("http://etcd.example.com:2379", OWN, False),
    # Not a plain http(s) URL with a host.
    ("c-client.a.svc:2379", OWN, False),
    ("unix://c-client.a.svc:2379", OWN, False),
    ("file:///etc/passwd", OWN, False),
    ("http://user:pw@c-client.a.svc:2379", OWN, False),
    ("http://c-client.b.svc@c-client.a.svc:2379", OWN, False),
    ("http://c-client.a.svc:notaport", OWN, False),
    ("http://c-client.a.svc:99999", OWN, False),
    ("http:// c-client.a.svc:2379", OWN, False),
    ("http://c-client.a.svc\\@evil:2379", OWN, False),
    ("http://", OWN, False),
    ("http://c-client%2eb.svc:2379", OWN, False),
    # What the administrator allowed.
    ("http://c-client.b.svc:2379", CROSS, True),
    ("http://c-0.c.b.svc.cluster.local:2379", CROSS, True),
    ("http://127.0.0.1:2379", CROSS, False),
    ("http://etcd.example.com:2379", CROSS, False),
    ("https://m1.etcd.example.com:2379", LISTED, True),
    ("https://M1.ETCD.example.com:2379", LISTED, True),
    ("http://10.0.0.5:2379", LISTED, True),
    ("http://10.0.0.6:2379", LISTED, False),
    ("http://etcd-main.shared.svc:2379", LISTED, True),
    ("http://c-client.b.svc:2379", LISTED, False),
    ("http://user@m1.etcd.example.com:2379", LISTED, False),
    ("http://c-client.a.svc:2379", LISTED, True),
    ("http://c-client.a.svc.example.org:2379", EndpointPolicy(cluster_domain="example.org"), True),
    ("http://c-client.a.svc.cluster.local:2379", EndpointPolicy(cluster_domain="example.org"), False),
])
def test_etcd_endpoints(url: str, policy: EndpointPolicy, allowed: bool) -> None:
    refusal = etcd_endpoint_refusal(url, "a", policy)
    assert (refusal is None) == allowed, refusal
    if refusal is not None:
        assert repr(url) in refusal, refusal


def test_a_refusal_names_the_endpoint_and_the_flags() -> None:
    refusal = etcd_endpoint_refusal("http://c-client.b.svc:2379", "a", OWN)
    assert refusal is not None
    assert "'http://c-client.b.svc:2379'" in refusal and "namespace b" in refusal
    assert CROSS_NAMESPACE_FLAG in refusal and ENDPOINT_HOSTS_FLAG in refusal


S3_LISTED = EndpointPolicy(allowed_s3_hosts=("minio.storage.svc", "*.s3.example.com"))


@pytest.mark.parametrize("url, policy, allowed", [
    ("", OWN, True),  # AWS
    ("", S3_LISTED, True),
    ("http://minio.anywhere:9000", OWN, True),  # no list: any host (CoreOS manifests keep working)
    ("127.0.0.1:9000", OWN, True),  # a bare host:port means https
    ("https://s3.eu-west-1.amazonaws.com", S3_LISTED, True),
    ("https://s3.cn-north-1.amazonaws.com.cn", S3_LISTED, True),
    ("http://minio.storage.svc:9000", S3_LISTED, True),
    ("https://eu.s3.example.com", S3_LISTED, True),
    ("minio.storage.svc:9000", S3_LISTED, True),
    ("http://minio.other.svc:9000", S3_LISTED, False),
    ("http://169.254.169.254", S3_LISTED, False),
    ("https://amazonaws.com.evil.example", S3_LISTED, False),
    ("ftp://minio.storage.svc", OWN, False),
    ("http://key:secret@minio.storage.svc:9000", OWN, False),
    ("http://key@minio.storage.svc:9000", S3_LISTED, False),
    ("http://minio.storage.svc:port", OWN, False),
])
def test_s3_endpoints(url: str, policy: EndpointPolicy, allowed: bool) -> None:
    refusal = s3_endpoint_refusal(url, policy, where="spec.s3.endpoint")
    assert (refusal is None) == allowed, refusal
    if refusal is not None:
        assert "spec.s3.endpoint" in refusal, refusal


def observed(spec: dict[str, Any], namespace: str = "a") -> ObservedBackup:
    return observed_backup(spec, namespace=namespace, now=NOW_TIME)


S3_SPEC = {"path": "bucket/key", "awsSecret": "aws"}


@pytest.mark.parametrize("case, spec, policy, refused_fragment", [
    ("own namespace", {"etcdEndpoints": ["http://c-client.a.svc:2379"]}, OWN, None),
    ("own cluster by name", {"etcdCluster": {"name": "c"}}, OWN, None),
    ("another namespace's cluster", {"etcdEndpoints": ["http://c-client.b.svc:2379"]}, OWN,
     "spec.etcdEndpoints[0]: etcd endpoint 'http://c-client.b.svc:2379' is in namespace b"),
    ("the second endpoint", {"etcdEndpoints": ["http://c-0.c.a.svc:2379", "http://10.1.2.3:2379"]}, OWN,
     "spec.etcdEndpoints[1]"),
    ("another namespace, allowed", {"etcdEndpoints": ["http://c-client.b.svc:2379"]}, CROSS, None),
    ("an S3 endpoint with credentials in it",
     {"etcdCluster": {"name": "c"}, "s3": {**S3_SPEC, "endpoint": "http://k:s@minio:9000"}}, OWN,
     "spec.s3.endpoint"),
    ("an S3 endpoint outside the list",
     {"etcdCluster": {"name": "c"}, "s3": {**S3_SPEC, "endpoint": "http://169.254.169.254"}}, S3_LISTED,
     S3_ENDPOINT_HOSTS_FLAG),
])
def test_the_planner_refuses_endpoints_not_allowed(case: str, spec: dict[str, Any], policy: EndpointPolicy,
                                                   refused_fragment: str | None) -> None:
    action = plan_next_action(observed({"storageType": "S3", "s3": S3_SPEC, **spec}), policy)
    if refused_fragment is None:
        assert isinstance(action, TakeBackup), (case, action)
    else:
        assert isinstance(action, RejectSpec) and action.reason == reasons.ENDPOINT_NOT_ALLOWED, (case, action)
        assert refused_fragment in action.message, (case, action.message)


def test_a_refusal_once_recorded_is_not_repeated_and_a_wider_allowance_retries() -> None:
    spec = {"storageType": "S3", "s3": S3_SPEC, "etcdEndpoints": ["http://c-client.b.svc:2379"]}
    seen = observed(spec)
    recorded = RecordedBackup(observed_generation=1, last_attempt_time=NOW_TIME, first_attempt_time=NOW_TIME,
                              consecutive_failures=1, last_reason=reasons.ENDPOINT_NOT_ALLOWED)
    again = ObservedBackup(seen.backup, recorded, NOW_TIME)
    assert not isinstance(plan_next_action(again, OWN), RejectSpec)
    later = ObservedBackup(seen.backup, recorded, NOW_TIME.replace(hour=5))
    assert isinstance(plan_next_action(later, CROSS), TakeBackup)
    assert reasons.ENDPOINT_NOT_ALLOWED in reasons.FAILURE_REASONS
    assert not reasons.is_transient(reasons.ENDPOINT_NOT_ALLOWED)


def test_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_settings([]).endpoint_policy == EndpointPolicy()
    settings = parse_settings([CROSS_NAMESPACE_FLAG, ENDPOINT_HOSTS_FLAG, " *.Etcd.example.com, 10.0.0.5 ,",
                               S3_ENDPOINT_HOSTS_FLAG, "minio.storage.svc", "--cluster-domain", "example.org"])
    assert settings.endpoint_policy == EndpointPolicy(
        allow_cross_namespace=True, allowed_hosts=("*.etcd.example.com", "10.0.0.5"),
        allowed_s3_hosts=("minio.storage.svc",), cluster_domain="example.org")
    monkeypatch.setenv("BACKUP_ALLOW_CROSS_NAMESPACE_ENDPOINTS", "true")
    monkeypatch.setenv("BACKUP_ALLOWED_ENDPOINT_HOSTS", "etcd.example.com")
    monkeypatch.setenv("BACKUP_ALLOWED_S3_ENDPOINT_HOSTS", "s3.example.com")
    policy = parse_settings([]).endpoint_policy
    assert policy.allow_cross_namespace and policy.allowed_hosts == ("etcd.example.com",)
    assert policy.allowed_s3_hosts == ("s3.example.com",)


def test_the_secrets_s3_endpoint_is_checked_before_any_request(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    class Untouchable(FakeStorage):
        def check_bucket(self, bucket: str) -> None:
            raise AssertionError("no request may be sent to an endpoint not allowed")
    monkeypatch.setattr(s3, "storage_for_location",
                        lambda *args, **kwargs: Untouchable(endpoint="http://169.254.169.254"))

    def no_api(namespace: str, name: str) -> dict[str, Any]:
        raise AssertionError("no API read expected")
    env = BackupEnvironment(read_secret=no_api, read_etcd_cluster=no_api, etcd=None,  # type: ignore[arg-type]
                            work_dir=str(tmp_path), endpoint_policy=S3_LISTED)
    request = BackupRequest(namespace="a", owner="b", location=StorageLocation("S3", s3=S3Location(path="bucket/key", aws_secret="aws")),
                            endpoints=("http://c-client.a.svc:2379",))
    with pytest.raises(BackupFailed) as failure:
        take_backup(request, env, logging.getLogger("test"))
    assert failure.value.reason == reasons.ENDPOINT_NOT_ALLOWED
    assert "endpoint_url of secret aws" in failure.value.message and "169.254.169.254" in failure.value.message


@pytest.mark.parametrize("storage, policy, refused_fragment", [
    ({"storageType": "ABS", "abs": {"path": "c/k", "absSecret": "azure", "endpoint": "http://169.254.169.254"}},
     S3_LISTED, "spec.abs.endpoint 'http://169.254.169.254': host 169.254.169.254 is not in"),
    ({"storageType": "ABS", "abs": {"path": "c/k", "absSecret": "azure",
                                    "endpoint": "https://acct.blob.core.windows.net"}}, S3_LISTED, None),
    ({"storageType": "GCS", "gcs": {"path": "b/k", "endpoint": "http://10.0.0.1:4443"}}, S3_LISTED,
     "spec.gcs.endpoint"),
    ({"storageType": "GCS", "gcs": {"path": "b/k"}}, S3_LISTED, None),
    ({"storageType": "OSS", "oss": {"path": "b/k", "ossSecret": "ali", "endpoint": "http://minio.other:9000"}},
     S3_LISTED, "nor one of Alibaba Cloud's"),
    ({"storageType": "OSS", "oss": {"path": "b/k", "ossSecret": "ali", "endpoint": "oss-cn-beijing.aliyuncs.com"}},
     S3_LISTED, None),
    ({"storageType": "OSS", "oss": {"path": "b/k", "ossSecret": "ali", "endpoint": "http://u:p@host"}}, OWN,
     "must not carry user information"),
])
def test_the_allow_list_covers_every_object_store(storage: dict[str, Any], policy: EndpointPolicy,
                                                  refused_fragment: str | None) -> None:
    action = plan_next_action(observed({"etcdCluster": {"name": "c"}, **storage}), policy)
    if refused_fragment is None:
        assert isinstance(action, TakeBackup), action
    else:
        assert isinstance(action, RejectSpec) and action.reason == reasons.ENDPOINT_NOT_ALLOWED, action
        assert refused_fragment in action.message, action.message

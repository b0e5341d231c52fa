"""Snapshots for restore tests: taken with etcdctl from a cluster the etcd operator runs, put on
the sandbox's S3 server with boto3 (as the backup operator would), plus broken ones."""
from __future__ import annotations

import base64
import os
import secrets
import tempfile
from collections.abc import Sequence
from typing import Any

import boto3
from botocore.config import Config
from kubernetes import client as k8s

from kube_sandbox.testing import Sandbox
from tests.integration.backup_operator.backups import coreos_aws_files
from tests.integration.etcd_operator.operator_clusters import Clusters

BUCKET = "restore-tests"
AWS_SECRET = "aws"


def s3_client(sandbox: Sandbox, secret_key: str | None = None) -> Any:
    config = sandbox.config
    return boto3.session.Session().client(
        "s3", endpoint_url=config.s3_endpoint, region_name="us-east-1",
        aws_access_key_id=config.s3_access_key, aws_secret_access_key=secret_key or config.s3_secret_key,
        config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"),
    )


def ensure_bucket(sandbox: Sandbox) -> None:
    client = s3_client(sandbox)
    try:
        client.create_bucket(Bucket=BUCKET)
    except (client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists):  # another worker made it
        pass


def create_aws_secret(sandbox: Sandbox, namespace: str, name: str = AWS_SECRET, *, secret_key: str | None = None,
                      server_in_config: bool = False) -> str:
    """The CoreOS awsSecret layout: AWS `credentials` and `config` files; `server_in_config`: the
    config file also names the sandbox's S3 server (for specs without `endpoint`)."""
    config = sandbox.config
    data = coreos_aws_files(config.s3_access_key, secret_key or config.s3_secret_key,
                            s3_endpoint=config.s3_endpoint if server_in_config else "")
    k8s.CoreV1Api(sandbox.api_client()).create_namespaced_secret(namespace, {
        "metadata": {"name": name},
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
    })
    return name


def snapshot_to_s3(clusters: Clusters, cluster: str, key: str, *, member: str | None = None,
                   flags: Sequence[str] = ()) -> bytes:
    """`etcdctl snapshot save` from one member of `cluster` (its client URL, etcdctl `flags` such
    as TLS files), uploaded as BUCKET/key; the bytes."""
    member = member or clusters.member_urls(cluster)[0]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "snapshot.db")
        result = clusters.sandbox.etcdctl([member], *flags, "snapshot", "save", path, timeout=120)
        assert result.returncode == 0, result.stderr
        with open(path, "rb") as stream:
            content = stream.read()
    put_object(clusters.sandbox, key, content)
    return content


def put_object(sandbox: Sandbox, key: str, content: bytes) -> None:
    ensure_bucket(sandbox)
    s3_client(sandbox).put_object(Bucket=BUCKET, Key=key, Body=content)


def unique_key(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}.db"

"""spec.restore of an EtcdCluster and the seed pod it gives: init containers that fetch with the
secret's credentials, restore with etcdutl for the seed's name, peer URL and new token, then
install; later members and clusters without spec.restore get none."""
from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from etcd_common.api.etcd_restore import parse_etcd_restore
from etcd_common.api.fields import SpecError
from etcd_common.api.restore_source import DEFAULT_BUMP_REVISION, parse_restore_source, restore_source_to_api
from etcd_common.api.storage_locations import EncryptionKeyRef
from etcd_common.api.versions import EtcdVersion
from etcd_common.seed import program
from etcd_common.seed.local_steps import install
from etcd_common.seed.tools import no_bump_warning, restore_tool
from etcd_common.storage import codec
from etcd_operator.manifests import build_member_pod, member_peer_url
from tests.unit.etcd_common.seed_restore_builders import RESTORE, SHA, cluster, seed_pod


def test_restore_source_round_trips() -> None:
    source = parse_restore_source(RESTORE)
    assert source is not None and source.bump_revision == DEFAULT_BUMP_REVISION
    assert parse_restore_source(restore_source_to_api(source)) == source


@pytest.mark.parametrize("raw, fragment", [
    ({**RESTORE, "sha256": "nothex"}, "spec.restore.sha256"),
    ({**RESTORE, "backupStorageType": "GCS", "gcs": {"path": "bucket-only"}}, "spec.restore.gcs.path"),
    ({**RESTORE, "s3": {"path": "bucket-only"}}, "<bucket>/<key>"),
    ({k: v for k, v in RESTORE.items() if k != "sha256"}, "spec.restore.sha256 is required"),
])
def test_bad_restore_source_is_a_spec_error(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        parse_restore_source(raw)
    assert fragment in (cluster(raw).spec_error or "")


def test_seed_pod_restores_before_etcd_starts() -> None:
    pod = seed_pod(cluster())
    fetch, restore, install_step = pod["spec"]["initContainers"]
    assert [fetch["name"], restore["name"], install_step["name"]] == ["restore-fetch", "restore-snapshot", "restore-install"]
    assert fetch["image"] == "etcd-operator-py:0.1.0" and fetch["command"] == ["etcd-restore-seed"]
    assert "--s3-path=bucket/dir/snap.db" in fetch["args"] and f"--sha256={SHA}" in fetch["args"]
    assert "--endpoint=http://127.0.0.1:9000" in fetch["args"] and "--force-path-style" in fetch["args"]
    assert "--aws-dir=/etc/etcd-restore/aws" in fetch["args"]
    assert {"name": "restore-aws-credentials", "secret": {"secretName": "aws"}} in pod["spec"]["volumes"]
    # etcdutl of the cluster's own etcd image, for the seed's name, peer URL and the new token.
    assert restore["image"] == "quay.io/coreos/etcd:v3.5.35"
    command = restore["command"]
    assert command[:4] == ["/usr/local/bin/etcdutl", "snapshot", "restore", "/var/etcd/restore/snapshot.db"]
    peer = "http://example-abcde.example.ns.svc:2380"
    assert "--name=example-abcde" in command and f"--initial-cluster=example-abcde={peer}" in command
    assert f"--initial-advertise-peer-urls={peer}" in command
    assert "--initial-cluster-token=cluster-uid" in command
    assert f"--bump-revision={DEFAULT_BUMP_REVISION}" in command and "--mark-compacted" in command
    assert "--data-dir=/var/etcd/data" in install_step["args"]
    # etcd itself runs with the same token and data dir.
    etcd_command = pod["spec"]["containers"][0]["command"]
    assert "--initial-cluster-token=cluster-uid" in etcd_command and "--data-dir=/var/etcd/data" in etcd_command
    for container in pod["spec"]["initContainers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_no_restore_containers_without_restore_or_for_joining_members() -> None:
    assert "initContainers" not in seed_pod(cluster(None))
    parsed = cluster()
    member = "example-fghij"
    pod = build_member_pod(parsed, member, state="existing", initial_cluster=[(member, member_peer_url(parsed, member))])
    assert "initContainers" not in pod["spec"]


def test_bump_revision_zero_leaves_revisions_alone() -> None:
    pod = seed_pod(cluster({**RESTORE, "bumpRevision": 0}))
    command = pod["spec"]["initContainers"][1]["command"]
    assert not any(arg.startswith("--bump-revision") for arg in command) and "--mark-compacted" not in command


@pytest.mark.parametrize(("version", "program", "bumped"), [
    ("3.4.23", "/usr/local/bin/etcdctl", False),  # 3.4 images have no etcdutl; etcdctl bumps from 3.4.27
    ("3.4.27", "/usr/local/bin/etcdctl", True),
    ("3.5.0", "/usr/local/bin/etcdutl", False),  # etcdutl from 3.5.0, --bump-revision from 3.5.10
    ("3.5.9", "/usr/local/bin/etcdutl", False),
    ("3.5.10", "/usr/local/bin/etcdutl", True),
    ("3.5.35", "/usr/local/bin/etcdutl", True),
    ("3.6.0", "/usr/local/bin/etcdutl", True),
    ("3.6.16", "/usr/local/bin/etcdutl", True),
])
def test_the_restore_program_is_the_one_the_version_has(version: str, program: str, bumped: bool) -> None:
    restore = seed_pod(cluster(version=version))["spec"]["initContainers"][1]
    command = restore["command"]
    assert command[:3] == [program, "snapshot", "restore"]
    assert any(arg.startswith("--bump-revision=") for arg in command) is bumped
    assert ("--mark-compacted" in command) is bumped
    assert (restore.get("env") == [{"name": "ETCDCTL_API", "value": "3"}]) is program.endswith("etcdctl")


@pytest.mark.parametrize(("version", "tool", "bump"), [
    ("3.3.25", None, False), ("3.4.0", "etcdctl", False), ("3.4.26", "etcdctl", False), ("3.4.27", "etcdctl", True),
    ("3.5.0", "etcdutl", False), ("3.5.9", "etcdutl", False), ("3.5.10", "etcdutl", True), ("3.6.16", "etcdutl", True),
])
def test_restore_tool_by_version(version: str, tool: str | None, bump: bool) -> None:
    found = restore_tool(EtcdVersion.of(version))
    assert (found.name if found else None) == tool
    assert (found.can_bump_revision if found else False) is bump
    if found is not None and not bump:
        assert "--bump-revision" in no_bump_warning(EtcdVersion.of(version), found)


def test_install_moves_restored_data_once(tmp_path: Path) -> None:
    staging, data = tmp_path / "restore", tmp_path / "data"
    (staging / "data" / "member").mkdir(parents=True)
    (staging / "snapshot.db").write_text("snap")
    assert "installed" in install(staging_dir=str(staging), staged_data_dir=str(staging / "data"), data_dir=str(data))
    assert (data / "member").is_dir() and not staging.exists()
    # A re-run (pod restarted) finds etcd's data in place and leaves it alone.
    (data / "member" / "written-by-etcd").write_text("x")
    (staging / "data" / "member").mkdir(parents=True)
    assert "left as it is" in install(staging_dir=str(staging), staged_data_dir=str(staging / "data"), data_dir=str(data))
    assert (data / "member" / "written-by-etcd").exists() and not staging.exists()


def test_restore_cluster_spec_template_is_checked() -> None:
    base = {"metadata": {"name": "r"}, "spec": {"etcdCluster": {"name": "c"}, "backupStorageType": "S3",
                                                 "s3": {"path": "b/k"}}}
    good = parse_etcd_restore({**base, "spec": {**base["spec"], "clusterSpec": {"size": 5}}})
    assert good.spec is not None and good.spec.cluster_spec == {"size": 5}
    bad = parse_etcd_restore({**base, "spec": {**base["spec"], "clusterSpec": {"size": 9}}})
    assert bad.spec is None and "spec.clusterSpec" in (bad.spec_error or "")


def test_coreos_restore_example_parses() -> None:
    import yaml
    text = (Path(__file__).resolve().parents[3] / "examples" / "restore_cr.yaml").read_text()
    parsed = parse_etcd_restore(yaml.safe_load(text))
    assert parsed.spec is not None and parsed.spec.etcd_cluster_name == "example-etcd-cluster"
    assert parsed.spec.storage.s3 is not None and parsed.spec.storage.s3.aws_secret == "<aws-secret>"


def test_the_seed_fetches_the_object_verified_only() -> None:
    fetch = seed_pod(cluster({**RESTORE, "etag": "etag-1", "versionId": "v7"}))["spec"]["initContainers"][0]
    assert "--etag=etag-1" in fetch["args"] and "--version-id=v7" in fetch["args"]
    unpinned = seed_pod(cluster())["spec"]["initContainers"][0]
    assert not any(arg.startswith(("--etag", "--version-id")) for arg in unpinned["args"])


@pytest.mark.parametrize("storage_type, section, secret_field", [
    ("ABS", {"path": "container/snap.db", "absSecret": "azure", "endpoint": "http://127.0.0.1:10000/acct"},
     "absSecret"),
    ("GCS", {"path": "bucket/snap.db", "gcpSecret": "gcp"}, "gcpSecret"),
    ("OSS", {"path": "bucket/snap.db", "ossSecret": "ali", "endpoint": "https://oss-cn-beijing.aliyuncs.com"},
     "ossSecret"),
])
def test_other_stores_round_trip_and_seed_from_their_mounted_secret(storage_type: str, section: dict[str, Any],
                                                                    secret_field: str) -> None:
    name = storage_type.lower()
    restore = {"backupStorageType": storage_type, name: section, "sha256": SHA, "versionId": "1700000000000001"}
    source = parse_restore_source(restore)
    assert source is not None and source.s3 is None and source.location.path == section["path"]
    assert parse_restore_source(restore_source_to_api(source)) == source
    assert restore_source_to_api(source)[name] == section
    pod = seed_pod(cluster(restore))
    fetch = pod["spec"]["initContainers"][0]
    assert f"--storage-type={storage_type}" in fetch["args"] and f"--path={section['path']}" in fetch["args"]
    assert "--secret-dir=/etc/etcd-restore/secret" in fetch["args"]
    assert "--version-id=1700000000000001" in fetch["args"]
    assert not any(arg.startswith("--s3-path") for arg in fetch["args"])
    assert [arg for arg in fetch["args"] if arg.startswith("--endpoint=")] == (
        [f"--endpoint={section['endpoint']}"] if "endpoint" in section else [])
    assert {"name": "restore-storage-credentials", "mountPath": "/etc/etcd-restore/secret",
            "readOnly": True} in fetch["volumeMounts"]
    assert {"name": "restore-storage-credentials", "secret": {"secretName": section[secret_field]}} in (
        pod["spec"]["volumes"])


def test_an_encrypted_restore_mounts_its_key_into_the_fetch_step_only() -> None:
    restore = {**RESTORE, "encryption": {"secretName": "backup-key", "secretKey": "aes"}}
    source = parse_restore_source(restore)
    assert source is not None and source.encryption == EncryptionKeyRef("backup-key", "aes")
    assert parse_restore_source(restore_source_to_api(source)) == source
    pod = seed_pod(cluster(restore))
    fetch, restore_step, install_step = pod["spec"]["initContainers"]
    assert "--encryption-key-file=/etc/etcd-restore/encryption/aes" in fetch["args"]
    mount = {"name": "restore-encryption-key", "mountPath": "/etc/etcd-restore/encryption", "readOnly": True}
    assert mount in fetch["volumeMounts"]
    assert mount not in restore_step["volumeMounts"] and mount not in install_step["volumeMounts"]
    assert {"name": "restore-encryption-key", "secret": {"secretName": "backup-key"}} in pod["spec"]["volumes"]
    plain = seed_pod(cluster())
    assert not any(arg.startswith("--encryption") for arg in plain["spec"]["initContainers"][0]["args"])
    assert all(volume["name"] != "restore-encryption-key" for volume in plain["spec"]["volumes"])


class ObjectFromBytes:
    """The one object the seed downloads (S3 stands in for every store: the decode is the same)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def download_file(self, bucket: str, key: str, path: str, *, if_match: str = "", version_id: str = "") -> int:
        Path(path).write_bytes(self.data)
        return len(self.data)


def encoded_snapshot(key: bytes | None) -> tuple[bytes, bytes]:
    body = b"\0" * 8 + b"bbolt pages" * 1000
    snapshot = body + hashlib.sha256(body).digest()
    out = io.BytesIO()
    codec.encode_stream(io.BytesIO(snapshot), out, codec.Encoding("Gzip", key), chunk_bytes=4096)
    return snapshot, out.getvalue()


@pytest.mark.parametrize("given, problem", [
    ("right", None), ("wrong", "EncryptionKeyWrong"), ("none", "EncryptionKeyMissing"), ("garbled", "not base64"),
])
def test_the_seed_decodes_an_encrypted_object_with_the_mounted_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        given: str, problem: str | None) -> None:
    key = bytes(range(32))
    snapshot, encoded = encoded_snapshot(key)
    monkeypatch.setattr(program, "_s3_storage", lambda location, aws_dir: ObjectFromBytes(encoded))
    key_file = tmp_path / "key"
    key_file.write_text({"right": base64.b64encode(key).decode(), "wrong": base64.b64encode(bytes(32)).decode(),
                         "none": "", "garbled": "%%%"}[given] + "\n")
    staging = tmp_path / "restore"
    args = ["fetch", "--s3-path=bucket/snap.db", f"--sha256={hashlib.sha256(snapshot).hexdigest()}",
            f"--staging-dir={staging}", f"--snapshot={staging}/snapshot.db", f"--aws-dir={tmp_path}"]
    if given != "none":
        args.append(f"--encryption-key-file={key_file}")
    status = program.main(args)
    if problem is None:
        assert status == 0
        assert (staging / "snapshot.db").read_bytes() == snapshot
        assert sorted(p.name for p in staging.iterdir()) == ["snapshot.db"]
    else:
        reasons = {"EncryptionKeyWrong": "was encrypted with key id", "EncryptionKeyMissing": "no key was given"}
        assert status == 1 and reasons.get(problem, problem) in capsys.readouterr().err
        assert list(staging.iterdir()) == []


def test_the_copy_and_install_steps_import_no_storage_sdk() -> None:
    """Every member of a restored cluster runs the seed program twice (copy from its staged claim,
    install); the storage SDKs cost a second or more of each start and neither step needs them."""
    check = ("import sys, etcd_common.seed.local_steps; "
             "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'azure', 'google', "
             "'oss2') or m.startswith('etcd_common.storage')); print(loaded); sys.exit(1 if loaded else 0)")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"imported at start: {done.stdout}{done.stderr}"

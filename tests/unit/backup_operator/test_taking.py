"""Taking one backup, with etcd, the snapshot's page reader and S3 replaced by fakes: which member the snapshot comes
from, what happens to a snapshot that is not whole, and the backup's deadline (on a fake clock)."""
from __future__ import annotations

import base64
import gzip
import hashlib
import io
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backup_operator import reasons, taking
from backup_operator.endpoint_policy import EndpointPolicy
from backup_operator.reasons import BackupFailed
from backup_operator.taking import WORK_PREFIX, BackupEnvironment, BackupRequest, WorkSpace, take_backup
from etcd_common.api.etcd_backup import SnapshotFingerprint
from etcd_common.api.storage_locations import EncryptionKeyRef, S3Location, StorageLocation
from etcd_common.etcd import etcdctl as ctl
from etcd_common.etcd import types as etcd_types
from etcd_common.storage import codec, s3
from kube_adapter.errors import NotFound
from tests.unit.backup_operator.storage_fakes import STARTED, FakeStorage

LOG = logging.getLogger("test_taking")
A, B, C, D = (f"http://127.0.0.1:{port}" for port in (2379, 2479, 2579, 2679))
CLUSTER_ID = 0x5EED  # the cluster the member list answers for


def whole_snapshot(body: bytes) -> bytes:
    """What etcd sends: the database followed by its SHA-256."""
    return body + hashlib.sha256(body).digest()


@dataclass
class Member:
    url: str
    revision: int = 0
    raft_index: int = 0
    learner: bool = False
    answers: bool = True
    status_errors: tuple[str, ...] = ()
    cluster_id: int = 0  # the cluster its status answers for (0: CLUSTER_ID, the member list's)
    snapshot: bytes = b""
    snapshot_error: str = ""
    snapshot_error_midway: str = ""  # etcdctl fails after writing half of the snapshot
    db_size: int = 0  # what its endpoint status reports


class FakeEtcd:
    """Stands for `EtcdAccess` and every `Etcdctl` it hands out; records which member was asked
    for a snapshot. `during_snapshot` runs inside each `snapshot_save` (to move a fake clock)."""

    def __init__(self, members: list[Member], *, member_list_fails: bool = False) -> None:
        self.members = {m.url: m for m in members}
        self.member_list_fails = member_list_fails
        self.snapshots_from: list[str] = []
        self.during_snapshot: Callable[[], None] = lambda: None
        self.mid_snapshot: Callable[[], None] = lambda: None  # with half of the file written
        self.fingerprint_error: ctl.EtcdctlError | None = None
        self.fingerprints_asked: list[tuple[tuple[str, ...], int]] = []

    def client_with_secret(self, namespace: str, owner: str, endpoints: tuple[str, ...], secret: str | None,
                           **options: Any) -> FakeEtcd.Client:
        return FakeEtcd.Client(self, endpoints)

    class Client:
        def __init__(self, etcd: FakeEtcd, endpoints: tuple[str, ...]) -> None:
            self.etcd = etcd
            self.endpoints = endpoints

        def cluster_members(self) -> etcd_types.MemberList:
            if self.etcd.member_list_fails:
                raise ctl.Unreachable("context deadline exceeded")
            return etcd_types.MemberList(tuple(
                etcd_types.Member(id=i + 1, name=f"m{i}", peer_urls=(f"http://127.0.0.1:{2380 + 100 * i}",),
                           client_urls=(m.url,), is_learner=m.learner)
                for i, m in enumerate(self.etcd.members.values())), CLUSTER_ID)

        def endpoint_status(self) -> list[etcd_types.EndpointStatus]:
            statuses = []
            for url in self.endpoints:
                m = self.etcd.members[url]
                if not m.answers:
                    statuses.append(etcd_types.EndpointStatus(member_id=0, leader_id=0, endpoint=url,
                                                       errors=("connection refused",)))
                    continue
                statuses.append(etcd_types.EndpointStatus(member_id=1, leader_id=1, version="3.6.16", endpoint=url,
                                                   raft_index=m.raft_index, revision=m.revision,
                                                   is_learner=m.learner, errors=m.status_errors,
                                                   cluster_id=m.cluster_id, db_size=m.db_size))
            return statuses

        def snapshot_save(self, path: str, *, endpoint: str | None = None, timeout_seconds: float = 600.0) -> None:
            assert endpoint is not None and timeout_seconds > 0
            self.etcd.snapshots_from.append(endpoint)
            self.etcd.during_snapshot()
            m = self.etcd.members[endpoint]
            if m.snapshot_error:
                raise ctl.Unreachable(m.snapshot_error)
            with open(f"{path}.part", "wb") as out:  # as etcdctl: written beside, renamed once complete
                half = len(m.snapshot) // 2
                out.write(m.snapshot[:half])
                out.flush()
                self.etcd.mid_snapshot()
                if m.snapshot_error_midway:
                    raise ctl.Unreachable(m.snapshot_error_midway)
                out.write(m.snapshot[half:])
            os.replace(f"{path}.part", path)

        def hash_kv(self, revision: int) -> etcd_types.HashKV:
            self.etcd.fingerprints_asked.append((self.endpoints, revision))
            if self.etcd.fingerprint_error is not None:
                raise self.etcd.fingerprint_error
            return etcd_types.HashKV(hash=77, compact_revision=2, hash_revision=revision)

        def key_count(self, revision: int) -> int:
            return 42


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def storage(monkeypatch: pytest.MonkeyPatch) -> FakeStorage:
    fake = FakeStorage()
    monkeypatch.setattr(s3, "storage_for_location", lambda *args, **kwargs: fake)
    return fake


@pytest.fixture
def revision_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The snapshot's revision read from its pages, replaced: every file read holds revision 1."""
    read: list[str] = []

    def snapshot_revision(path: str) -> int:
        read.append(Path(path).read_bytes().decode(errors="replace"))
        return 1
    monkeypatch.setattr(taking, "snapshot_revision", snapshot_revision)
    return read


def request(endpoints: tuple[str, ...] = (A,), **overrides: Any) -> BackupRequest:
    return BackupRequest(namespace="ns", owner="b", location=StorageLocation("S3", s3=S3Location(path="bucket/etcd.backup", aws_secret="aws")),
                         endpoints=endpoints, **overrides)


def environment(etcd: FakeEtcd, tmp_path: Path) -> BackupEnvironment:
    def no_api(namespace: str, name: str) -> dict[str, Any]:
        raise AssertionError("no API read expected")
    return BackupEnvironment(read_secret=no_api, read_etcd_cluster=no_api, etcd=etcd,  # type: ignore[arg-type]
                             work_dir=str(tmp_path / "work"))


def test_the_snapshot_comes_from_the_healthy_voter_with_the_highest_revision(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([
        Member(A, revision=40, raft_index=90, snapshot=whole_snapshot(b"a")),
        Member(B, revision=42, raft_index=91, snapshot=whole_snapshot(b"b")),
        Member(C, revision=99, raft_index=99, learner=True, snapshot=whole_snapshot(b"learner")),
        Member(D, revision=120, answers=False),
    ])
    result = take_backup(request((A,)), environment(etcd, tmp_path), LOG, now=lambda: STARTED)
    # The given endpoint is one member; the member list names all of them. The learner and the
    # member that does not answer are never asked, though their revisions are higher.
    assert etcd.snapshots_from == [B]
    assert (result.endpoint, result.etcd_revision, result.etcd_version) == (B, 42, "3.6.16")
    assert storage.uploads == {"etcd.backup": whole_snapshot(b"b")}
    assert result.sha256 == hashlib.sha256(whole_snapshot(b"b")).hexdigest()
    assert storage.metadata["etcd.backup"] == {"sha256": result.sha256, "etcd-revision": "42", "etcd-version": "3.6.16"}


def test_equal_revisions_prefer_the_member_further_along_in_raft(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=42, raft_index=90, snapshot=whole_snapshot(b"a")),
                     Member(B, revision=42, raft_index=95, snapshot=whole_snapshot(b"b"))])
    assert take_backup(request((A, B)), environment(etcd, tmp_path), LOG).endpoint == B


def test_a_member_whose_status_reports_an_error_is_skipped(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=50, status_errors=("NOSPACE",), snapshot=whole_snapshot(b"a")),
                     Member(B, revision=42, snapshot=whole_snapshot(b"b"))])
    assert take_backup(request((A, B)), environment(etcd, tmp_path), LOG).endpoint == B
    assert etcd.snapshots_from == [B]


def test_a_member_url_answering_for_another_cluster_is_never_backed_up(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    """A member's DNS name reaching another etcd cluster's member (a reused name or address): its
    status names another cluster than the member list's, so its (higher) revision is not ours."""
    etcd = FakeEtcd([Member(A, revision=42, cluster_id=CLUSTER_ID, snapshot=whole_snapshot(b"a")),
                     Member(B, revision=900, cluster_id=777, snapshot=whole_snapshot(b"other cluster"))])
    assert take_backup(request((A,)), environment(etcd, tmp_path), LOG).endpoint == A
    assert etcd.snapshots_from == [A]


def test_without_a_member_list_the_given_endpoints_are_asked_themselves(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=7, snapshot=whole_snapshot(b"a")),
                     Member(B, revision=9, snapshot=whole_snapshot(b"b")),
                     Member(C, revision=11, learner=True, snapshot=whole_snapshot(b"c")),
                     Member(D, revision=13, snapshot=whole_snapshot(b"d"))], member_list_fails=True)
    # D is not among the given endpoints; C is, but a learner.
    assert take_backup(request((A, B, C)), environment(etcd, tmp_path), LOG).endpoint == B


def test_no_healthy_member_fails_as_etcd_unreachable_and_uploads_nothing(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, answers=False), Member(B, learner=True, revision=3)])
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A, B)), environment(etcd, tmp_path), LOG)
    assert failure.value.reason == reasons.ETCD_UNREACHABLE
    assert "no healthy etcd member" in failure.value.message
    assert etcd.snapshots_from == [] and storage.uploads == {}


def test_a_snapshot_that_is_not_whole_is_never_uploaded_and_the_next_member_is_asked(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    truncated = whole_snapshot(b"x" * 100)[:-5]
    etcd = FakeEtcd([Member(A, revision=50, snapshot=truncated),
                     Member(B, revision=49, snapshot_error="connection reset"),
                     Member(C, revision=48, snapshot=whole_snapshot(b"c"))])
    result = take_backup(request((A, B, C)), environment(etcd, tmp_path), LOG)
    assert etcd.snapshots_from == [A, B, C]
    assert result.endpoint == C and storage.uploads == {"etcd.backup": whole_snapshot(b"c")}
    assert os.listdir(tmp_path / "work") == []  # nothing left on disk


def test_when_no_member_delivers_a_whole_snapshot_the_reason_says_so(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=50, snapshot=b"not a snapshot at all, no trailer here....")])
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A,)), environment(etcd, tmp_path), LOG)
    assert failure.value.reason == reasons.SNAPSHOT_INVALID
    assert A in failure.value.message and "integrity check" in failure.value.message
    assert storage.uploads == {} and os.listdir(tmp_path / "work") == []


def test_the_deadline_passing_during_the_snapshot_fails_the_backup_as_timed_out(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    clock = FakeMonotonic()
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a"))])

    def slow_snapshot() -> None:
        clock.now += 61.0
    etcd.during_snapshot = slow_snapshot
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A,), timeout_seconds=60.0), environment(etcd, tmp_path), LOG, monotonic=clock)
    assert failure.value.reason == reasons.TIMED_OUT
    assert "within 60s" in failure.value.message and "timeoutInSecond" in failure.value.message
    assert failure.value.transient
    assert storage.uploads == {} and os.listdir(tmp_path / "work") == []


def test_a_backup_within_its_deadline_reports_its_duration_on_the_clock_given(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    clock = FakeMonotonic()
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a"))])

    def slow_snapshot() -> None:
        clock.now += 59.0
    etcd.during_snapshot = slow_snapshot
    result = take_backup(request((A,), timeout_seconds=60.0), environment(etcd, tmp_path), LOG, monotonic=clock)
    assert result.duration_seconds == 59.0
    assert revision_reads == [whole_snapshot(b"a").decode(errors="replace")]  # read before upload completed


def test_the_snapshot_revision_and_the_member_keys_and_hash_at_it_are_recorded(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    """What a trial restore (spec.trialRestore) compares with: the snapshot's own revision (read
    from its pages, 1 here), and the key count and keyspace hash the member it came from has at
    that revision."""
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a"))])
    result = take_backup(request((A,), record_keyspace=True), environment(etcd, tmp_path), LOG)
    assert result.fingerprint == SnapshotFingerprint(1, key_count=42, hash_kv=77, compact_revision=2)
    assert etcd.fingerprints_asked == [((A,), 1)]


def test_without_trial_restores_the_member_is_not_asked_to_hash_its_keyspace(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a"))])
    result = take_backup(request((A,)), environment(etcd, tmp_path), LOG)
    assert result.fingerprint == SnapshotFingerprint(1) and storage.uploads
    assert etcd.fingerprints_asked == []


def test_a_member_that_cannot_tell_its_keys_at_the_revision_does_not_fail_the_backup(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a"))])
    etcd.fingerprint_error = ctl.EtcdctlError("mvcc: required revision has been compacted")
    result = take_backup(request((A,), record_keyspace=True), environment(etcd, tmp_path), LOG)
    assert result.fingerprint == SnapshotFingerprint(1) and storage.uploads


def test_the_deadline_passing_during_the_upload_fails_the_backup_as_timed_out(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeMonotonic()
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a"))])
    upload = storage.upload_file

    def slow_upload(bucket: str, key: str, path: str, **kwargs: Any) -> s3.UploadResult:
        clock.now += 61.0
        return upload(bucket, key, path, **kwargs)
    monkeypatch.setattr(storage, "upload_file", slow_upload)
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A,), timeout_seconds=60.0), environment(etcd, tmp_path), LOG, monotonic=clock)
    assert failure.value.reason == reasons.TIMED_OUT
    assert storage.uploads == {}  # the progress callback stopped it before the object was completed


def test_periodic_backups_are_keyed_by_revision_and_time_and_retention_keeps_the_newest(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    storage.uploads["etcd.backup_v9_2026-01-01-00:00:00"] = b"old"
    storage.uploads["etcd.backup_v10_2026-01-01-01:00:00"] = b"newer"
    storage.uploads["etcd.backup.notes"] = b"foreign"
    etcd = FakeEtcd([Member(A, revision=11, snapshot=whole_snapshot(b"a"))])
    result = take_backup(request((A,), periodic=True, max_backups=2), environment(etcd, tmp_path), LOG,
                         now=lambda: STARTED)
    assert result.key == "etcd.backup_v11_2026-01-02-03:04:05"
    assert sorted(storage.uploads) == ["etcd.backup.notes", "etcd.backup_v10_2026-01-01-01:00:00", result.key]
    assert (result.retained, result.retention_error) == (2, "")


def test_a_cluster_recreated_under_its_name_keeps_its_new_backups(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    """The rewind: the old cluster's backups have higher revisions but older times."""
    storage.uploads["etcd.backup_v300_2026-01-02-03:00:00"] = b"old"
    storage.uploads["etcd.backup_v301_2026-01-02-03:00:05"] = b"old"
    etcd = FakeEtcd([Member(A, revision=1, snapshot=whole_snapshot(b"new"))])
    result = take_backup(request((A,), periodic=True, max_backups=2), environment(etcd, tmp_path), LOG,
                         now=lambda: STARTED)
    assert result.key == "etcd.backup_v1_2026-01-02-03:04:05"
    assert sorted(storage.uploads) == ["etcd.backup_v1_2026-01-02-03:04:05", "etcd.backup_v301_2026-01-02-03:00:05"]
    assert result.retained == 2


def test_the_backup_just_uploaded_survives_a_clock_that_went_back(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    storage.uploads["etcd.backup_v10_2026-06-01-00:00:00"] = b"from a clock running ahead"
    storage.uploads["etcd.backup_v11_2026-06-01-00:00:05"] = b"from a clock running ahead"
    etcd = FakeEtcd([Member(A, revision=12, snapshot=whole_snapshot(b"a"))])
    result = take_backup(request((A,), periodic=True, max_backups=2), environment(etcd, tmp_path), LOG,
                         now=lambda: STARTED)
    assert sorted(storage.uploads) == ["etcd.backup_v11_2026-06-01-00:00:05", result.key]
    assert result.retained == 2


KEY = bytes(range(32))


def environment_with_key(etcd: FakeEtcd, tmp_path: Path, secret: dict[str, Any] | None) -> BackupEnvironment:
    def read_secret(namespace: str, name: str) -> dict[str, Any]:
        assert (namespace, name) == ("ns", "backup-key")
        if secret is None:
            raise NotFound("secrets \"backup-key\" not found")
        return secret
    env = environment(etcd, tmp_path)
    env.read_secret = read_secret
    return env


def key_secret(key: bytes = KEY, name: str = "key") -> dict[str, Any]:
    return {"data": {name: base64.b64encode(base64.b64encode(key)).decode()}}


def test_a_compressed_and_encrypted_backup_decodes_to_the_snapshot_and_says_how_it_was_encoded(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    snapshot = whole_snapshot(b"\0" * 8 + b"bbolt page " * 50_000)
    etcd = FakeEtcd([Member(A, revision=42, snapshot=snapshot)])
    result = take_backup(request((A,), periodic=True, max_backups=1, compression="Gzip",
                                 encryption=EncryptionKeyRef("backup-key")),
                         environment_with_key(etcd, tmp_path, key_secret()), LOG, now=lambda: STARTED)
    # The key stays the CoreOS one: retention and restores find it by name as before.
    assert result.key == "etcd.backup_v42_2026-01-02-03:04:05" and result.retained == 1
    uploaded = storage.uploads[result.key]
    assert uploaded.startswith(codec.MAGIC) and len(uploaded) < len(snapshot) // 10
    assert b"bbolt page" not in uploaded
    decoded = codec.decode_stream(io.BytesIO(uploaded), KEY, where="test")
    assert b"".join(decoded) == snapshot
    assert result.sha256 == hashlib.sha256(snapshot).hexdigest()  # the snapshot's, not the object's
    assert (result.size, result.compression, result.key_id) == (len(uploaded), "Gzip", codec.key_id(KEY))
    assert storage.metadata[result.key] == {
        "sha256": result.sha256, "etcd-revision": "42", "etcd-version": "3.6.16", "compression": "gzip",
        "encryption": "aes-256-gcm", "encryption-key-id": codec.key_id(KEY)}
    # The revision was read from the snapshot itself, not from the encoded object.
    assert revision_reads and revision_reads[0].startswith("\0" * 8 + "bbolt page")


def test_compression_alone_uploads_a_gzip_file(storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    snapshot = whole_snapshot(b"x" * 100_000)
    etcd = FakeEtcd([Member(A, revision=1, snapshot=snapshot)])
    result = take_backup(request((A,), compression="Gzip"), environment(etcd, tmp_path), LOG, now=lambda: STARTED)
    assert gzip.decompress(storage.uploads["etcd.backup"]) == snapshot
    assert (result.compression, result.key_id) == ("Gzip", "")
    assert storage.metadata["etcd.backup"]["compression"] == "gzip"


@pytest.fixture
def unreadable_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every snapshot's pages fail the revision read (`snapshot_revision`)."""
    def unreadable(path: str) -> int:
        raise ctl.SnapshotInvalid("neither meta page is valid")
    monkeypatch.setattr(taking, "snapshot_revision", unreadable)


@pytest.mark.usefixtures("unreadable_pages")
def test_an_encoded_backup_whose_snapshot_pages_cannot_be_read_is_never_uploaded(
        storage: FakeStorage, tmp_path: Path) -> None:
    """The saved snapshot's revision is read before its encoding is uploaded."""
    etcd = FakeEtcd([Member(A, revision=1, snapshot=whole_snapshot(b"x" * 1000))])
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A,), compression="Gzip"), environment(etcd, tmp_path), LOG)
    assert failure.value.reason == reasons.SNAPSHOT_INVALID and "neither meta page" in failure.value.message
    assert storage.uploads == {} and os.listdir(tmp_path / "work") == []


@pytest.mark.parametrize("secret, reason, fragment", [
    (None, reasons.ENCRYPTION_KEY_MISSING, "secret ns/backup-key (spec.encryption.secretName) does not exist"),
    (key_secret(name="other"), reasons.ENCRYPTION_KEY_MISSING, "has no key 'key'"),
    (key_secret(b"short"), reasons.ENCRYPTION_KEY_INVALID, "decodes to 5 bytes"),
    ({"stringData": {"key": KEY.hex()}}, reasons.ENCRYPTION_KEY_INVALID, "decodes to 48 bytes"),
])
def test_a_missing_or_unusable_key_fails_before_etcd_is_asked_and_nothing_is_uploaded(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path, secret: dict[str, Any] | None,
        reason: str, fragment: str) -> None:
    etcd = FakeEtcd([Member(A, revision=1, snapshot=whole_snapshot(b"a"))])
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((A,), encryption=EncryptionKeyRef("backup-key")),
                    environment_with_key(etcd, tmp_path, secret), LOG, now=lambda: STARTED)
    assert failed.value.reason == reason and fragment in failed.value.message
    assert reason in reasons.FAILURE_REASONS and not failed.value.transient
    assert etcd.snapshots_from == [] and storage.uploads == {}


def test_an_encoding_that_does_not_decode_to_the_snapshot_is_never_uploaded(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_encode = codec.encode_file

    def lossy_encode(source: str, target: str, encoding: codec.Encoding, **kwargs: Any) -> int:
        written = real_encode(source, target, encoding, **kwargs)
        with open(target, "r+b") as out:
            out.truncate(written - 1)
        return written - 1
    monkeypatch.setattr(codec, "encode_file", lossy_encode)
    etcd = FakeEtcd([Member(A, revision=1, snapshot=whole_snapshot(b"a" * 10_000))])
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((A,), compression="Gzip", encryption=EncryptionKeyRef("backup-key")),
                    environment_with_key(etcd, tmp_path, key_secret()), LOG, now=lambda: STARTED)
    assert failed.value.reason == reasons.ENCODING_FAILED and "does not decode" in failed.value.message
    assert storage.uploads == {}


def test_a_database_larger_than_the_free_work_space_is_refused_before_the_snapshot(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=1, db_size=1000, snapshot=whole_snapshot(b"a")),
                     Member(B, revision=2, db_size=800, snapshot=whole_snapshot(b"b"))])
    env = environment(etcd, tmp_path)
    env.work_space = WorkSpace(free_bytes=lambda path: 999)
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((A, B)), env, LOG, now=lambda: STARTED)
    # The largest member's database counts: the snapshot may come from any of them.
    assert failed.value.reason == reasons.WORK_DIRECTORY_FULL
    assert "needs 1000 bytes" in failed.value.message and "999 are free" in failed.value.message
    # Retried (never given up as a transient one would be after timeoutInSecond), nothing left behind.
    assert reasons.WORK_DIRECTORY_FULL in reasons.FAILURE_REASONS and not failed.value.transient
    assert etcd.snapshots_from == [] and storage.uploads == {} and os.listdir(env.work_dir) == []
    env.work_space = WorkSpace(free_bytes=lambda path: 1000)
    assert take_backup(request((A, B)), env, LOG, now=lambda: STARTED).endpoint == B


def test_an_encoded_backup_needs_room_for_the_snapshot_and_its_encoded_copy(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=1, db_size=1000, snapshot=whole_snapshot(b"x" * 900))])
    env = environment(etcd, tmp_path)
    env.work_space = WorkSpace(free_bytes=lambda path: 1999)
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((A,), compression="Gzip"), env, LOG, now=lambda: STARTED)
    assert failed.value.reason == reasons.WORK_DIRECTORY_FULL and "needs 2010 bytes" in failed.value.message
    take_backup(request((A,)), env, LOG, now=lambda: STARTED)  # unencoded: the snapshot alone fits
    env.work_space = WorkSpace(free_bytes=lambda path: 2010)
    take_backup(request((A,), compression="Gzip"), env, LOG, now=lambda: STARTED)


def test_backups_running_at_once_share_the_free_work_space(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=1, db_size=600, snapshot=whole_snapshot(b"a"))])
    env = environment(etcd, tmp_path)
    env.work_space = WorkSpace(free_bytes=lambda path: 1000)
    with env.work_space.reserve(env.work_dir, 600):  # another backup, not written yet
        with pytest.raises(BackupFailed) as failed:
            take_backup(request((A,)), env, LOG, now=lambda: STARTED)
        assert "600 of them held by backups running now" in failed.value.message
    take_backup(request((A,)), env, LOG, now=lambda: STARTED)  # released when it ended


def test_each_backup_writes_in_a_directory_of_its_own_removed_after_it(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=1, snapshot=whole_snapshot(b"a")),
                     Member(B, revision=2, snapshot_error="connection reset")])
    env = environment(etcd, tmp_path)
    seen: list[list[str]] = []
    etcd.during_snapshot = lambda: seen.append(os.listdir(env.work_dir))
    take_backup(request((A, B)), env, LOG, now=lambda: STARTED)
    assert len(seen) == 2 and all(len(entries) == 1 and entries[0].startswith(f"{WORK_PREFIX}ns_b_")
                                  for entries in seen)
    assert os.listdir(env.work_dir) == []
    etcd.members[A].snapshot_error = "connection reset"
    with pytest.raises(BackupFailed):
        take_backup(request((A, B)), env, LOG, now=lambda: STARTED)
    assert os.listdir(env.work_dir) == []


# --- Every store (S3, OSS, ABS, GCS): the snapshot uploaded while etcdctl writes it


@pytest.fixture
def streaming(storage: FakeStorage) -> FakeStorage:
    storage.sets_metadata_last = True
    return storage


def test_the_upload_to_a_store_taking_metadata_last_starts_before_the_snapshot_is_saved(
        streaming: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    """etcdctl is held with half of the file written until the upload has bytes of it: a
    save-then-upload backup never gets them (and fails the wait)."""
    body = b"0123456789abcdef" * 8
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(body))])
    overlapped: list[bool] = []
    etcd.mid_snapshot = lambda: overlapped.append(streaming.first_bytes.wait(timeout=10))
    result = take_backup(request((A,), record_keyspace=True), environment(etcd, tmp_path), LOG)
    assert overlapped == [True]
    assert streaming.uploads == {"etcd.backup": whole_snapshot(body)}
    sha256 = hashlib.sha256(whole_snapshot(body)).hexdigest()
    assert result.sha256 == sha256 and result.size == len(whole_snapshot(body))
    assert streaming.metadata["etcd.backup"] == {"sha256": sha256, "etcd-revision": "5", "etcd-version": "3.6.16"}
    assert revision_reads == [whole_snapshot(body).decode(errors="replace")]  # checked before the commit
    assert result.fingerprint == SnapshotFingerprint(1, key_count=42, hash_kv=77, compact_revision=2)
    assert os.listdir(tmp_path / "work") == []


def test_a_streamed_snapshot_that_is_not_whole_or_breaks_off_is_never_committed_and_the_next_member_is_asked(
        streaming: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    truncated = whole_snapshot(b"x" * 100)[:-5]
    etcd = FakeEtcd([Member(A, revision=50, snapshot=truncated),
                     Member(B, revision=49, snapshot=whole_snapshot(b"b" * 64), snapshot_error_midway="connection reset"),
                     Member(C, revision=48, snapshot=whole_snapshot(b"c" * 64))])
    result = take_backup(request((A, B, C)), environment(etcd, tmp_path), LOG)
    assert etcd.snapshots_from == [A, B, C]
    assert result.endpoint == C and streaming.uploads == {"etcd.backup": whole_snapshot(b"c" * 64)}
    assert os.listdir(tmp_path / "work") == []


@pytest.mark.usefixtures("unreadable_pages")
def test_a_streamed_snapshot_whose_pages_cannot_be_read_fails_the_backup_before_the_commit(
        streaming: FakeStorage, tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a" * 64))])
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A,)), environment(etcd, tmp_path), LOG)
    assert failure.value.reason == reasons.SNAPSHOT_INVALID
    assert streaming.uploads == {} and os.listdir(tmp_path / "work") == []


def test_the_deadline_passing_while_a_snapshot_streams_fails_the_backup_as_timed_out(
        streaming: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    clock = FakeMonotonic()
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a" * 64))])

    def slow_snapshot() -> None:
        clock.now += 61.0
    etcd.mid_snapshot = slow_snapshot
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A,), timeout_seconds=60.0), environment(etcd, tmp_path), LOG, monotonic=clock)
    assert failure.value.reason == reasons.TIMED_OUT
    assert streaming.uploads == {} and os.listdir(tmp_path / "work") == []


def test_a_streamed_backup_whose_late_metadata_cannot_be_set_fails_with_the_store_reason(
        streaming: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    """S3's copy onto itself refused: the store's reason and message, no other member asked (the
    snapshot was whole), never a success without the sha256 metadata."""
    streaming.late_metadata_error = s3.S3AccessDenied("set metadata (a copy onto itself) on s3://bucket/etcd.backup: "
                                                      "access denied; the uploaded object stays, without sha256")
    etcd = FakeEtcd([Member(A, revision=5, snapshot=whole_snapshot(b"a" * 64)),
                     Member(B, revision=4, snapshot=whole_snapshot(b"b" * 64))])
    with pytest.raises(BackupFailed) as failure:
        take_backup(request((A, B)), environment(etcd, tmp_path), LOG)
    assert failure.value.reason == s3.REASON_ACCESS_DENIED
    assert "the uploaded object stays, without sha256" in failure.value.message
    assert etcd.snapshots_from == [A] and os.listdir(tmp_path / "work") == []
    assert "sha256" not in streaming.metadata["etcd.backup"]  # what stays: the object, as completed


@pytest.mark.parametrize("disk_free, limit, in_use, fits", [
    (10**12, 1500, 0, True),       # the node's disk has room, the emptyDir's limit too
    (10**12, 1500, 600, False),    # the node's disk has room, the emptyDir's limit not: the kubelet would evict
    (10**12, 999, 0, False),
    (999, 10**12, 0, False),       # the disk is the smaller bound
    (10**12, None, 10**9, True),   # no limit given: the disk's free space alone
])
def test_the_work_directory_is_checked_against_its_own_size_limit(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path, disk_free: int, limit: int | None,
        in_use: int, fits: bool) -> None:
    etcd = FakeEtcd([Member(A, revision=1, db_size=1000, snapshot=whole_snapshot(b"a"))])
    env = environment(etcd, tmp_path)
    env.work_space = WorkSpace(free_bytes=lambda path: disk_free, size_limit_bytes=limit,
                               used_bytes=lambda path: in_use)
    if fits:
        take_backup(request((A,)), env, LOG, now=lambda: STARTED)
        return
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((A,)), env, LOG, now=lambda: STARTED)
    assert failed.value.reason == reasons.WORK_DIRECTORY_FULL and etcd.snapshots_from == []
    if limit is not None and limit < disk_free:
        assert f"its size limit {limit} less {in_use} in use" in failed.value.message


def test_what_the_work_directory_holds_counts_against_its_size_limit(tmp_path: Path) -> None:
    (tmp_path / "left").mkdir()
    (tmp_path / "left" / "snapshot.db").write_bytes(b"x" * 700)
    space = WorkSpace(free_bytes=lambda path: 10**12, size_limit_bytes=1000)
    with pytest.raises(BackupFailed) as failed:
        with space.reserve(str(tmp_path), 301):
            pass
    assert "300 are free" in failed.value.message
    with space.reserve(str(tmp_path), 300):
        pass


# Finding 9: every etcd endpoint the operator dials is checked after resolution.
OWN_SERVICE = "http://etcd-client.ns.svc:2379"
ALIAS = "http://alias.ns.svc:2379"
OTHER_TENANT = "http://etcd-client.tenant-b.svc:2379"


def resolving_environment(etcd: FakeEtcd, tmp_path: Path, services: dict[tuple[str, str], dict[str, Any]],
                          policy: EndpointPolicy | None = None) -> BackupEnvironment:
    env = environment(etcd, tmp_path)
    env.read_service = lambda namespace, name: services.get((namespace, name)) or _not_found(namespace, name)
    env.check_etcd_endpoints = True
    if policy is not None:
        env.endpoint_policy = policy
    return env


def _not_found(namespace: str, name: str) -> dict[str, Any]:
    raise NotFound(f"services {name!r} not found")


def external_name(target: str) -> dict[str, Any]:
    return {"spec": {"type": "ExternalName", "externalName": target}}


@pytest.mark.parametrize("case, services, policy, refused", [
    ("an ExternalName in the namespace pointing at another tenant's client Service",
     {("ns", "alias"): external_name("etcd-client.tenant-b.svc.cluster.local")}, None, "tenant-b"),
    ("an ExternalName pointing outside the cluster", {("ns", "alias"): external_name("etcd.example.com")}, None,
     "etcd.example.com"),
    ("an ExternalName pointing at an IP", {("ns", "alias"): external_name("10.0.0.5")}, None, "IP address"),
    ("an ExternalName chain that ends in another tenant's namespace",
     {("ns", "alias"): external_name("hop.ns.svc"), ("ns", "hop"): external_name("etcd-client.tenant-b.svc")}, None,
     "tenant-b"),
    ("an ExternalName to the namespace's own client Service", {("ns", "alias"): external_name("etcd-client.ns.svc")},
     None, ""),
    ("a ClusterIP Service", {("ns", "alias"): {"spec": {"type": "ClusterIP"}}}, None, ""),
    ("cross-namespace endpoints allowed by the administrator",
     {("ns", "alias"): external_name("etcd-client.tenant-b.svc")}, EndpointPolicy(allow_cross_namespace=True), ""),
])
def test_an_endpoint_is_checked_after_its_external_name_is_resolved(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path, case: str,
        services: dict[tuple[str, str], dict[str, Any]], policy: EndpointPolicy | None, refused: str) -> None:
    etcd = FakeEtcd([Member(ALIAS, revision=1, snapshot=whole_snapshot(b"a"))])
    env = resolving_environment(etcd, tmp_path, services, policy)
    if not refused:
        assert take_backup(request((ALIAS,)), env, LOG, now=lambda: STARTED).endpoint == ALIAS, case
        return
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((ALIAS,)), env, LOG, now=lambda: STARTED)
    assert failed.value.reason == reasons.ENDPOINT_NOT_ALLOWED, case
    assert "ExternalName Service ns/alias" in failed.value.message and refused in failed.value.message, case
    assert etcd.snapshots_from == [] and storage.uploads == {}


def test_member_list_urls_outside_the_policy_are_never_dialed(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    """The given endpoint is the tenant's own, but its member list names another tenant's members."""
    etcd = FakeEtcd([Member(OTHER_TENANT, revision=9, snapshot=whole_snapshot(b"theirs"))])
    etcd.members[OWN_SERVICE] = etcd.members.pop(OTHER_TENANT)  # the given endpoint answers ...
    etcd.members[OWN_SERVICE].url = OTHER_TENANT  # ... with a member list naming the other tenant's URL
    env = resolving_environment(etcd, tmp_path, {("ns", "etcd-client"): {"spec": {"type": "ClusterIP"}}})
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((OWN_SERVICE,)), env, LOG, now=lambda: STARTED)
    assert failed.value.reason == reasons.ENDPOINT_NOT_ALLOWED
    assert "member list" in failed.value.message and "tenant-b" in failed.value.message
    assert etcd.snapshots_from == [] and storage.uploads == {}


def test_a_token_uri_outside_the_allow_list_is_refused_before_any_request(
        storage: FakeStorage, revision_reads: list[str], tmp_path: Path) -> None:
    etcd = FakeEtcd([Member(A, revision=1, snapshot=whole_snapshot(b"a"))])
    env = environment(etcd, tmp_path)
    env.endpoint_policy = EndpointPolicy(allowed_s3_hosts=("minio.example.com",))
    storage.token_uri = "http://169.254.169.254/computeMetadata/v1/token"  # type: ignore[attr-defined]
    with pytest.raises(BackupFailed) as failed:
        take_backup(request((A,)), env, LOG, now=lambda: STARTED)
    assert failed.value.reason == reasons.ENDPOINT_NOT_ALLOWED and "token_uri" in failed.value.message
    assert etcd.snapshots_from == [] and storage.uploads == {}
    storage.token_uri = "https://oauth2.googleapis.com/token"  # type: ignore[attr-defined]
    take_backup(request((A,)), env, LOG, now=lambda: STARTED)

"""The other stores' backup figure: a figure of its own (smaller with --quick), and the EtcdBackup
it times names the store as an EtcdBackup in CoreOS's shape does."""
from __future__ import annotations

import pytest

from benchmarks import __main__ as bench_main
from benchmarks.__main__ import parse_args, plan
from benchmarks.store_backup_figures import BenchStore
from etcd_common.api.etcd_backup import parse_backup_spec


def test_backup_stores_is_a_figure_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BENCH_QUICK", "BENCH_REPEAT"):
        monkeypatch.delenv(name, raising=False)
    assert [name for name, _ in plan(parse_args(["--only", "backup-stores"]))] == ["backup-stores"]
    assert "backup-stores" in [name for name, _ in plan(parse_args([]))]


@pytest.mark.parametrize(("storage_type", "secret_field", "endpoint"), [
    ("S3", "awsSecret", "http://127.0.0.1:8333"), ("ABS", "absSecret", ""), ("GCS", "gcpSecret", "http://127.0.0.1:4443"), ("OSS", "ossSecret", "http://127.0.0.1:8333"),
])
def test_the_timed_backup_names_its_store(storage_type: str, secret_field: str, endpoint: str) -> None:
    store = BenchStore(storage_type, {}, endpoint, lambda path, bucket, key: None)
    fields = store.fields("bench", "run-0")
    spec = parse_backup_spec({"etcdEndpoints": ["http://e.ns.svc:2379"], **fields})
    section = storage_type.lower()
    assert spec.storage.storage_type == storage_type and spec.storage.path == "bench/run-0.backup"
    assert fields[section][secret_field] == spec.storage.secret == f"store-credentials-{section}"
    assert spec.storage.endpoint == endpoint


def test_the_peak_rss_backups_default_to_a_1_gib_snapshot_and_the_size_is_a_parameter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BENCH_QUICK", "BENCH_REPEAT", "BENCH_RSS_SNAPSHOT_MIB"):
        monkeypatch.delenv(name, raising=False)
    assert parse_args([]).rss_snapshot_mib == 1024
    assert parse_args(["--rss-snapshot-mib", "512"]).rss_snapshot_mib == 512
    monkeypatch.setenv("BENCH_RSS_SNAPSHOT_MIB", "300")
    assert parse_args([]).rss_snapshot_mib == 300


def test_the_store_figures_take_a_median_of_three_runs_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BENCH_QUICK", "BENCH_REPEAT"):
        monkeypatch.delenv(name, raising=False)
    assert parse_args([]).repeat == 2  # the other figures' default
    calls: list[int] = []
    monkeypatch.setattr(bench_main, "measure_store_backups",
                        lambda sandbox, repeat, database_mib, rss_mib: calls.append(repeat) or [])
    for argv in (["--only", "backup-stores"], ["--only", "backup-stores", "--quick"],
                 ["--only", "backup-stores", "--repeat", "5"]):
        [(_, run)] = plan(parse_args(argv))
        run(None, None)  # type: ignore[arg-type]
    monkeypatch.setenv("BENCH_REPEAT", "4")
    [(_, run)] = plan(parse_args(["--only", "backup-stores"]))
    run(None, None)  # type: ignore[arg-type]
    assert calls == [3, 1, 5, 4]


def test_a_bucket_another_store_already_removed_is_left_alone() -> None:
    """S3 and OSS share SeaweedFS and the bench's bucket name: the second removal finds it gone."""
    from benchmarks.store_backup_figures import _remove_bucket
    from etcd_common.storage.objects import BucketNotFound

    class Gone:
        deleted: list[str] = []

        def list(self, bucket: str) -> list[object]:
            raise BucketNotFound(f"bucket {bucket!r} does not exist", backend="OSS")

        def delete_bucket(self, bucket: str) -> None:
            self.deleted.append(bucket)
    store = Gone()
    _remove_bucket(store, "bench")  # type: ignore[arg-type]
    assert store.deleted == []

"""`etcd-restore-seed`: the program of the seed pod's restore init containers
(`etcd_common.seed.pod`), in the operator image.

    etcd-restore-seed fetch --s3-path=BUCKET/KEY --sha256=HEX --staging-dir=DIR --snapshot=FILE
                            [--etag=ETAG] [--version-id=ID]
                            [--endpoint=URL] [--force-path-style] [--aws-dir=DIR]
    etcd-restore-seed fetch --storage-type=ABS|GCS|OSS --path=BUCKET/KEY --sha256=HEX ...
                            [--etag=ETAG] [--version-id=ID] [--endpoint=URL] [--secret-dir=DIR]
    etcd-restore-seed fetch ... [--encryption-key-file=FILE]
    etcd-restore-seed fetch --staged-snapshot=FILE --sha256=HEX --staging-dir=DIR --snapshot=FILE
    etcd-restore-seed install --staging-dir=DIR --staged-data-dir=DIR --data-dir=DIR

`fetch` clears the staging directory, downloads the object with the credentials of the mounted
awsSecret (`credentials` and `config` files) and refuses it unless its sha256 is the one given;
with --etag / --version-id it asks S3 for that object only (If-Match / VersionId), so an object
replaced since the restore operator verified it is refused before it is downloaded.
--endpoint and --force-path-style win over the secret's `endpoint_url` and `s3` `addressing_style`
(as for the operators: `S3Storage.for_location`). For ABS, GCS and OSS, `--secret-dir` is the
mounted absSecret, gcpSecret or ossSecret (one file per key), read as the operators read the
secret itself (`etcd_common.storage.locations`). Without a mounted secret the fetch is refused
(`CredentialsRequired`): the seed pod borrows no identity, neither an operator's nor its node's.
A compressed or encrypted object (`etcd_common.storage.codec`, told by its first bytes) is
decoded into the snapshot file, with the key in --encryption-key-file (the EtcdCluster's
`spec.restore.encryption` Secret, mounted); the sha256 is the decoded snapshot's.
With --staged-snapshot it copies that file instead of downloading, and `install` moves the
restored data directory into place: both as `etcd-restore-local copy` / `install`
(`local_steps.py`), which seed pods run instead, as it starts without importing the storage
SDKs; kept here for pods made by earlier versions. Exit status 0 on success, 1 with one line on
stderr otherwise.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from etcd_common.api.storage_locations import STORAGE_SECTIONS, OtherLocation, S3Location, StorageLocation
from etcd_common.seed.local_steps import (
    SnapshotMismatch,
    add_install_arguments,
    copy_step,
    file_sha256,
    install_step,
    run_step,
)
from etcd_common.storage import codec
from etcd_common.storage.locations import object_url, split_location, storage_for_location
from etcd_common.storage.objects import CredentialsRequired, ObjectChanged, ObjectStorage, StorageError
from etcd_common.storage.s3 import (
    AWS_SECRET_CONFIG_FILE,
    AWS_SECRET_CREDENTIALS_FILE,
    S3Storage,
    parse_aws_files,
)

PROGRAM = "etcd-restore-seed"


def fetch(location: S3Location | StorageLocation, *, aws_dir: str | None = None, sha256: str, staging_dir: str,
          snapshot: str, etag: str = "", version_id: str = "", secret_dir: str | None = None,
          encryption_key_file: str | None = None) -> int:
    """Download the snapshot into `snapshot` (inside a fresh `staging_dir`), decoding it if it is
    compressed or encrypted; returns the object's size."""
    if isinstance(location, StorageLocation) and location.s3 is not None:
        location = location.s3
    if not (aws_dir if isinstance(location, S3Location) else secret_dir):
        raise CredentialsRequired(
            "no secret is mounted (--aws-dir / --secret-dir): the seed pod fetches only with the secret named in "
            "the EtcdCluster's spec.restore, never with its own or its node's identity")
    shutil.rmtree(staging_dir, ignore_errors=True)
    os.makedirs(staging_dir, exist_ok=True)
    storage: ObjectStorage
    if isinstance(location, StorageLocation):
        storage = _mounted_secret_storage(location, secret_dir)
        where = location
    else:
        storage = _s3_storage(location, aws_dir)
        where = StorageLocation("S3", s3=location)
    bucket, key = split_location(where)
    url = object_url(where, bucket, key)
    downloaded = f"{snapshot}.object"
    try:
        size = storage.download_file(bucket, key, downloaded, if_match=etag, version_id=version_id)
    except ObjectChanged as error:
        raise SnapshotMismatch(f"{error.message}: {url} changed since the restore verified it "
                               f"(ETag {etag or '-'}, version {version_id or '-'})") from error
    _decode(downloaded, snapshot, encryption_key_file, where=url)
    found = file_sha256(snapshot)
    if found != sha256.lower():
        os.remove(snapshot)
        raise SnapshotMismatch(f"{url} has sha256 {found}, expected {sha256}: the object "
                               "changed since the restore verified it")
    return size


def _decode(downloaded: str, snapshot: str, encryption_key_file: str | None, *, where: str) -> None:
    """The snapshot file from the object downloaded: itself, or decoded (codec.CodecError when
    it is encrypted and the key is absent or another)."""
    if not codec.file_is_encoded(downloaded):
        os.rename(downloaded, snapshot)
        return
    try:
        key = None
        if encryption_key_file:
            key = codec.parse_key(Path(encryption_key_file).read_text(), where=f"encryption key {encryption_key_file}")
        codec.decode_file(downloaded, snapshot, key, where=where)
    finally:
        os.remove(downloaded)


def _mounted_secret_storage(location: StorageLocation, secret_dir: str | None) -> ObjectStorage:
    """The storage of an ABS, GCS or OSS location with the secret mounted at `secret_dir` (each
    key a file), read as the operators read the Secret object."""
    files: dict[str, Any] = {}
    if secret_dir:
        directory = Path(secret_dir)
        files = {entry.name: entry.read_text() for entry in directory.iterdir()
                 if entry.is_file() and not entry.name.startswith("..")}
    other = location.other or OtherLocation(path="")
    mounted = StorageLocation(location.storage_type,
                              other=OtherLocation(other.path, secret=secret_dir or "", endpoint=other.endpoint))

    def read_mounted(namespace: str, name: str) -> dict[str, Any]:
        return {"stringData": files}
    return storage_for_location(mounted, "mounted at", read_mounted)


def _s3_storage(location: S3Location, aws_dir: str | None) -> S3Storage:
    credentials = None
    if aws_dir:
        directory = Path(aws_dir)
        files = {name: (directory / name).read_text() if (directory / name).is_file() else ""
                 for name in (AWS_SECRET_CREDENTIALS_FILE, AWS_SECRET_CONFIG_FILE)}
        credentials = parse_aws_files(files[AWS_SECRET_CREDENTIALS_FILE], files[AWS_SECRET_CONFIG_FILE],
                                      where=f"awsSecret mounted at {aws_dir}")
    return S3Storage.for_location(location, credentials)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM,
                                     description="Init-container steps that seed an etcd member from a snapshot on "
                                                 "S3, ABS, GCS or OSS.")
    steps = parser.add_subparsers(dest="step", required=True)
    fetch_parser = steps.add_parser("fetch", help="download the snapshot and check its sha256")
    fetch_parser.add_argument("--s3-path", default="", help="<bucket>/<key> on S3")
    fetch_parser.add_argument("--storage-type", default="S3", choices=sorted(STORAGE_SECTIONS),
                              help="where the snapshot is (with --path for ABS, GCS and OSS)")
    fetch_parser.add_argument("--path", default="", help="<bucket or container>/<key> on ABS, GCS or OSS")
    fetch_parser.add_argument("--secret-dir", default=None,
                              help="directory with the absSecret's, gcpSecret's or ossSecret's keys as files")
    fetch_parser.add_argument("--endpoint", default="",
                              help="S3-compatible server URL; empty: the awsSecret's endpoint_url, else AWS")
    fetch_parser.add_argument("--force-path-style", action="store_true",
                              help="path-style bucket addressing; absent: the awsSecret's s3 addressing_style")
    fetch_parser.add_argument("--aws-dir", default=None,
                              help="directory with the awsSecret's `credentials` and `config` files")
    fetch_parser.add_argument("--sha256", required=True)
    fetch_parser.add_argument("--etag", default="", help="fetch only the object with this ETag (If-Match)")
    fetch_parser.add_argument("--version-id", default="", help="fetch this version of the object")
    fetch_parser.add_argument("--encryption-key-file", default=None,
                              help="file with the AES-256 key (base64 of 32 bytes) of an encrypted backup")
    fetch_parser.add_argument("--staged-snapshot", default="",
                              help="copy this file (a snapshot the restore operator staged) instead of downloading")
    fetch_parser.add_argument("--staging-dir", required=True)
    fetch_parser.add_argument("--snapshot", required=True)
    add_install_arguments(steps.add_parser("install", help="move the restored data directory into place"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    # The local steps, as pods made by earlier versions still ask this program for them.
    if args.step == "install":
        return run_step(install_step, args, PROGRAM)
    if args.staged_snapshot:
        return run_step(copy_step, args, PROGRAM)
    try:
        if args.step == "fetch":
            location: S3Location | StorageLocation
            if args.storage_type == "S3":
                if not args.s3_path:
                    parser.error("--s3-path is required with --storage-type S3")
                location = S3Location(path=args.s3_path, endpoint=args.endpoint,
                                      force_path_style=args.force_path_style)
                path = args.s3_path
            else:
                if not args.path:
                    parser.error(f"--path is required with --storage-type {args.storage_type}")
                location = StorageLocation(args.storage_type,
                                           other=OtherLocation(path=args.path, endpoint=args.endpoint))
                path = args.path
            size = fetch(location, aws_dir=args.aws_dir, secret_dir=args.secret_dir, sha256=args.sha256,
                         staging_dir=args.staging_dir, snapshot=args.snapshot, etag=args.etag,
                         version_id=args.version_id, encryption_key_file=args.encryption_key_file)
            print(f"fetched {path} from {args.storage_type} ({size} bytes, sha256 {args.sha256}) to {args.snapshot}")
    except (StorageError, SnapshotMismatch, codec.CodecError, OSError) as error:
        print(f"{PROGRAM} {args.step}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

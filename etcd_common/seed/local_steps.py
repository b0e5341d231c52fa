"""`etcd-restore-local`: the restore init-container steps that read only local files, in the
operator image. Every member of a restored cluster runs it twice, so it imports nothing but the
standard library: the storage SDKs `etcd-restore-seed` needs to download (`program.py`) take a
second or more of a container's start.

    etcd-restore-local copy --staged-snapshot=FILE --sha256=HEX --staging-dir=DIR --snapshot=FILE
    etcd-restore-local install --staging-dir=DIR --staged-data-dir=DIR --data-dir=DIR

`copy` clears the staging directory and copies the snapshot the restore operator's staging pod
fetched and checked onto a claim (`spec.restore.stagedClaim(s)`, mounted read-only), refusing it
unless its sha256 is the one given. `install` moves the data directory etcdutl restored into
place, unless etcd's data directory exists already (this init container ran before and etcd may
have written since), then removes the staging directory. Exit status 0 on success, 1 with one
line on stderr otherwise.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Sequence

PROGRAM = "etcd-restore-local"
READ_CHUNK_BYTES = 1024 * 1024


class SnapshotMismatch(Exception):
    """The snapshot file is not the snapshot the restore verified."""


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(READ_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def copy_staged(staged: str, *, sha256: str, staging_dir: str, snapshot: str) -> int:
    """Copy the staged snapshot `staged` into `snapshot` (inside a fresh `staging_dir`) and check
    its sha256; returns its size."""
    shutil.rmtree(staging_dir, ignore_errors=True)
    os.makedirs(staging_dir, exist_ok=True)
    if not os.path.isfile(staged):
        raise FileNotFoundError(f"no staged snapshot at {staged}: the staging claim does not hold one")
    shutil.copyfile(staged, snapshot)
    found = file_sha256(snapshot)
    if found != sha256.lower():
        os.remove(snapshot)
        raise SnapshotMismatch(f"the staged snapshot {staged} has sha256 {found}, expected {sha256}")
    return os.path.getsize(snapshot)


def install(*, staging_dir: str, staged_data_dir: str, data_dir: str) -> str:
    """Put the restored data directory in place; returns what was done."""
    if os.path.exists(data_dir):
        done = f"{data_dir} exists already (restored earlier); left as it is"
    elif not os.path.isdir(staged_data_dir):
        raise FileNotFoundError(f"no restored data directory at {staged_data_dir}")
    else:
        os.rename(staged_data_dir, data_dir)
        done = f"restored data installed at {data_dir}"
    shutil.rmtree(staging_dir, ignore_errors=True)
    return done


def add_install_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--staging-dir", required=True)
    parser.add_argument("--staged-data-dir", required=True)
    parser.add_argument("--data-dir", required=True)


def copy_step(args: argparse.Namespace) -> str:
    """`copy` (or `etcd-restore-seed fetch --staged-snapshot`): what was done."""
    size = copy_staged(args.staged_snapshot, sha256=args.sha256, staging_dir=args.staging_dir, snapshot=args.snapshot)
    return f"copied the staged snapshot {args.staged_snapshot} ({size} bytes, sha256 {args.sha256}) to {args.snapshot}"


def install_step(args: argparse.Namespace) -> str:
    return install(staging_dir=args.staging_dir, staged_data_dir=args.staged_data_dir, data_dir=args.data_dir)


def run_step(step: Callable[[argparse.Namespace], str], args: argparse.Namespace, program: str) -> int:
    """Run `step`, print what it did; 1 with one line on stderr when it fails."""
    try:
        print(step(args))
    except (SnapshotMismatch, OSError) as error:
        print(f"{program} {args.step}: {error}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROGRAM,
                                     description="Restore init-container steps on local files: copy a staged "
                                                 "snapshot, install the restored data directory.")
    steps = parser.add_subparsers(dest="step", required=True)
    copy_parser = steps.add_parser("copy", help="copy the staged snapshot and check its sha256")
    copy_parser.add_argument("--staged-snapshot", required=True, help="the snapshot the restore operator staged")
    copy_parser.add_argument("--sha256", required=True)
    copy_parser.add_argument("--staging-dir", required=True)
    copy_parser.add_argument("--snapshot", required=True)
    add_install_arguments(steps.add_parser("install", help="move the restored data directory into place"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return run_step(copy_step if args.step == "copy" else install_step, args, PROGRAM)


if __name__ == "__main__":
    sys.exit(main())

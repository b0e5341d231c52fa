"""Is a snapshot file whole? etcd appends the SHA-256 of the database to every snapshot it sends;
a truncated or corrupted file does not match it. Used by the backup operator (on what it saves) and
the restore operator (on what it downloads, before etcdutl reads it: etcdutl panics or dies of
SIGBUS on some truncated files instead of reporting them). The same pass gives the SHA-256 of the whole file
(written to status and to the object's metadata). The pass can follow the file while etcdctl is
still writing it, so the check costs almost nothing once the snapshot is saved."""
from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import BinaryIO, Final

from etcd_common.etcd.etcdctl import SnapshotInvalid

TRAILER_BYTES: Final = 32  # sha256 digest
READ_BYTES: Final = 1024 * 1024
FOLLOW_POLL_SECONDS: Final = 0.01


class SnapshotDigest:
    """Fed a snapshot's bytes in order; `finish` checks the trailer and returns the file's SHA-256.
    One pass of SHA-256 gives both: the file is the body followed by the trailer, so the file's
    digest is the body's hash state with the trailer added."""

    def __init__(self) -> None:
        self._body = hashlib.sha256()
        self._tail = b""  # the last TRAILER_BYTES seen: not yet known to be body or trailer
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.size += len(chunk)
        if len(chunk) >= TRAILER_BYTES:
            # At least a trailer's length follows the tail seen so far: that tail is body.
            view = memoryview(chunk)
            self._body.update(self._tail)
            self._body.update(view[:-TRAILER_BYTES])
            self._tail = bytes(view[-TRAILER_BYTES:])
            return
        data = self._tail + chunk
        if len(data) > TRAILER_BYTES:
            self._body.update(data[:-TRAILER_BYTES])
            self._tail = data[-TRAILER_BYTES:]
        else:
            self._tail = data

    def finish(self, where: str) -> str:
        if self.size <= TRAILER_BYTES:
            raise SnapshotInvalid(f"snapshot {where} has {self.size} bytes: too short to be an etcd snapshot")
        if self._tail != self._body.digest():
            raise SnapshotInvalid(f"snapshot {where} failed its integrity check: the SHA-256 etcd appended "
                                  "does not match the data (truncated, corrupt, or not a snapshot "
                                  "etcd sent, such as a copied member database)")
        whole = self._body.copy()
        whole.update(self._tail)
        return whole.hexdigest()


def verify_snapshot_file(path: str, *, where: str | None = None) -> str:
    """Check the file's SHA-256 trailer; return the SHA-256 (hex) of the whole file. Raises
    SnapshotInvalid when the trailer does not match (or the file is too short to have one),
    naming the snapshot by `where` (default: the path)."""
    digest = SnapshotDigest()
    with open(path, "rb") as snapshot:
        while chunk := snapshot.read(READ_BYTES):
            digest.feed(chunk)
    return digest.finish(where or path)


def follow_snapshot(partial_path: str, final_path: str, written: threading.Event) -> str | None:
    """Digest a snapshot while it is written to `partial_path` (renamed to `final_path` when
    complete; an open file survives the rename): read what is there, wait for more until `written`
    is set, then read to the end. Returns the file's SHA-256, None if no file appeared; raises
    SnapshotInvalid as `verify_snapshot_file` does."""
    snapshot = None
    while snapshot is None:
        for candidate in (partial_path, final_path):
            try:
                snapshot = open(candidate, "rb")
                break
            except FileNotFoundError:
                continue
        if snapshot is None:
            if written.is_set():
                # etcdctl may have renamed between our two tries; a last look at the final name.
                if os.path.exists(final_path):
                    continue
                return None
            written.wait(FOLLOW_POLL_SECONDS)
    digest = SnapshotDigest()
    with snapshot:
        while True:
            chunk = snapshot.read(READ_BYTES)
            if chunk:
                digest.feed(chunk)
            elif written.is_set():
                # Whatever was written before `written` was set is readable now: drain it.
                while chunk := snapshot.read(READ_BYTES):
                    digest.feed(chunk)
                break
            else:
                written.wait(FOLLOW_POLL_SECONDS)
    return digest.finish(final_path)


class GrowingSnapshot:
    """A readable stream of a snapshot etcdctl is still writing to `partial_path` (renamed to
    `final_path` when complete): an upload reads it while etcd sends it, so the transfer from etcd
    and the upload to the store overlap instead of following each other. Each `read(n)` returns n
    bytes, fewer only at the end (what chunked uploads expect); the bytes are digested in order.
    The end is returned only once `saved` (etcdctl's run) has succeeded, the whole file has been
    read, its SHA-256 trailer matches, and `on_complete(sha256)` has returned: until then an
    upload cannot finish, and anything raised (etcdctl's failure, SnapshotInvalid, the check's own
    error) stops it before its object is complete; `failure` keeps what was raised. `check_time`
    is called while waiting for more (it raises when the backup's time is up). `seek` may go back
    to what was already read (an upload retrying a chunk): those bytes are not digested twice."""

    def __init__(self, partial_path: str, final_path: str, saved: Future[None],
                 on_complete: Callable[[str], None], check_time: Callable[[], object]) -> None:
        self._paths = (partial_path, final_path)
        self._saved = saved
        self._on_complete = on_complete
        self._check_time = check_time
        self._file: BinaryIO | None = None
        self._position = 0
        self._digest = SnapshotDigest()
        self._ended = False
        self.sha256 = ""
        self.failure: BaseException | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self._position + offset if whence == 1 else -1
        if not 0 <= target <= self._digest.size:
            raise OSError(f"a snapshot being written can only be re-read from what was read (asked {target})")
        self._position = target
        if self._file is not None:
            self._file.seek(target)
        return target

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def read(self, size: int = -1) -> bytes:
        try:
            return self._read(READ_BYTES if size is None or size < 0 else size)
        except BaseException as error:
            if self.failure is None:
                self.failure = error
            raise

    def _read(self, size: int) -> bytes:
        if self.failure is not None:
            raise self.failure
        pieces: list[bytes] = []
        wanted = size
        while wanted > 0:
            snapshot = self._open()
            chunk = snapshot.read(wanted) if snapshot is not None else b""
            if chunk:
                self._take(chunk)
                pieces.append(chunk)
                wanted -= len(chunk)
                continue
            if self._saved.done():
                self._saved.result()  # etcdctl's failure stops the upload here
                snapshot = self._open()
                chunk = snapshot.read(wanted) if snapshot is not None else b""
                if chunk:  # written before etcdctl exited: drained first
                    self._take(chunk)
                    pieces.append(chunk)
                    wanted -= len(chunk)
                    continue
                if snapshot is None:
                    raise SnapshotInvalid("etcdctl reported success but wrote no snapshot file")
                self._end()
                break
            self._check_time()
            try:
                self._saved.exception(timeout=FOLLOW_POLL_SECONDS)  # more bytes, or etcdctl's exit
            except TimeoutError:
                pass
        return b"".join(pieces)

    def _take(self, chunk: bytes) -> None:
        """Digest what was not digested yet (a re-read after `seek` back is not)."""
        start = self._position
        self._position += len(chunk)
        if self._position > self._digest.size:
            self._digest.feed(chunk[self._digest.size - start:] if start < self._digest.size else chunk)

    def _end(self) -> None:
        if not self._ended and self._position == self._digest.size:
            self.sha256 = self._digest.finish(self._paths[1])
            self._on_complete(self.sha256)
            self._ended = True

    def _open(self) -> BinaryIO | None:
        if self._file is None:
            for candidate in self._paths:
                try:
                    self._file = open(candidate, "rb")
                    self._file.seek(self._position)
                    break
                except FileNotFoundError:
                    continue
        return self._file

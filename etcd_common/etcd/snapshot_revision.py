"""The revision an etcd snapshot holds, read from its bbolt pages: the newest key of etcd's `key`
bucket, as `etcdutl snapshot status` reports it, in a few page reads instead of a pass over the
whole file. The backup operator reads it before an upload completes (the snapshot's SHA-256
trailer, checked first, says the bytes are the ones etcd sent); `etcdutl snapshot status`, which
also checks every page and hashes every key, still reads each snapshot a restore or a trial restore
uses. (Beside an upload, on two cores shared with etcd and the object store, that full read
delayed every backup's completion.)

What is checked on the way: both meta pages (magic, version, checksum; the newer valid one is
used, as bbolt does), and every page read (inside the file, its header naming the page asked for,
a branch or leaf page where one is expected, elements inside the page). A file that fails any of
these raises SnapshotInvalid.

The layout (go.etcd.io/bbolt, little-endian as written on amd64 and arm64): a page starts with a
16-byte header (id u64, flags u16, count u16, overflow u32); the meta follows it on pages 0 and 1
(magic, version, page size, flags u32; root bucket: root page u64, sequence u64; freelist u64,
high-water page u64, txid u64, checksum u64 = FNV-1a 64 of the bytes before it); a branch page's
elements are (pos, ksize u32, child page u64), a leaf page's (flags, pos, ksize, vsize u32), each
key at its element's offset plus pos, a leaf's value right after its key. A bucket's value is its
header (root page u64, sequence u64), and, when the root page is 0, the bucket's one page inline
after it."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Final, NoReturn

from etcd_common.etcd.etcdctl import SnapshotInvalid

PAGE_HEADER: Final = struct.Struct("<QHHI")  # id, flags, count, overflow
META: Final = struct.Struct("<IIIIQQQQQQ")  # magic .. txid, then the checksum
BRANCH_ELEMENT: Final = struct.Struct("<IIQ")  # pos, ksize, child page
LEAF_ELEMENT: Final = struct.Struct("<IIII")  # flags, pos, ksize, vsize
BUCKET_HEADER: Final = struct.Struct("<QQ")  # root page, sequence
MAGIC: Final = 0xED0CDAED
VERSION: Final = 2
BRANCH_PAGE: Final = 0x01
LEAF_PAGE: Final = 0x02
BUCKET_LEAF: Final = 0x01
FIRST_META_PAGE_SIZE: Final = 4096  # read first: the page size is in the meta it holds
KEY_BUCKET: Final = b"key"
REVISION_BYTES: Final = 8  # a `key` bucket key: the main revision (big-endian), "_", the sub-revision
MAX_DEPTH: Final = 64  # a B+tree this deep is a loop in a damaged file, not a database
FNV_OFFSET: Final = 0xCBF29CE484222325
FNV_PRIME: Final = 0x100000001B3


@dataclass(frozen=True)
class _Meta:
    page_size: int
    root_page: int
    high_water: int  # the first page id past the database
    txid: int


@dataclass(frozen=True)
class _Page:
    flags: int
    count: int
    data: bytes  # the page with its overflow pages (or an inline bucket's page)


def snapshot_revision(path: str) -> int:
    """The newest revision in the `key` bucket of the snapshot at `path` (0 when it is empty, as
    etcdutl reports it). Raises SnapshotInvalid when the file is not a readable bbolt database
    with that bucket."""
    try:
        with open(path, "rb") as snapshot:
            return _Reader(snapshot.fileno(), os.fstat(snapshot.fileno()).st_size, path).revision()
    except OSError as error:
        raise SnapshotInvalid(f"cannot read snapshot {path}: {error}") from error


class _Reader:
    def __init__(self, fd: int, size: int, path: str) -> None:
        self._fd = fd
        self._size = size
        self._path = path
        self._meta = self._newest_meta()

    def revision(self) -> int:
        bucket = self._find_bucket(self._page(self._meta.root_page), KEY_BUCKET)
        last = self._last_key(bucket)
        if last is None:
            return 0
        if len(last) < REVISION_BYTES:
            self._invalid(f"its newest `key` entry is {len(last)} bytes long, not a revision")
        return int.from_bytes(last[:REVISION_BYTES], "big")

    def _invalid(self, why: str) -> NoReturn:
        raise SnapshotInvalid(f"snapshot {self._path} is not a readable etcd database: {why}")

    def _newest_meta(self) -> _Meta:
        """Pages 0 and 1 hold a meta each; bbolt uses the valid one with the higher txid."""
        first = self._meta_at(0)
        page_size = first.page_size if first is not None else FIRST_META_PAGE_SIZE
        second = self._meta_at(page_size)
        valid = [meta for meta in (first, second) if meta is not None]
        if not valid:
            self._invalid("neither meta page is valid (magic, version or checksum)")
        return max(valid, key=lambda meta: meta.txid)

    def _meta_at(self, offset: int) -> _Meta | None:
        raw = os.pread(self._fd, PAGE_HEADER.size + META.size, offset)
        if len(raw) < PAGE_HEADER.size + META.size:
            return None
        body = raw[PAGE_HEADER.size:]
        magic, version, page_size, _, root_page, _, _, high_water, txid, checksum = META.unpack(body)
        if magic != MAGIC or version != VERSION or checksum != _fnv64a(body[:META.size - 8]):
            return None
        if page_size < 512 or page_size & (page_size - 1):
            return None
        return _Meta(page_size, root_page, high_water, txid)

    def _page(self, page_id: int, expected: int = BRANCH_PAGE | LEAF_PAGE) -> _Page:
        page_size = self._meta.page_size
        if not 2 <= page_id < self._meta.high_water or (page_id + 1) * page_size > self._size:
            self._invalid(f"page {page_id} is outside the database")
        header = os.pread(self._fd, PAGE_HEADER.size, page_id * page_size)
        stored_id, flags, count, overflow = PAGE_HEADER.unpack(header)
        if stored_id != page_id or not flags & expected:
            self._invalid(f"page {page_id} is not the tree page it should be (id {stored_id}, flags {flags:#x})")
        length = (overflow + 1) * page_size
        if page_id * page_size + length > self._size:
            self._invalid(f"page {page_id} runs past the end of the file")
        return _Page(flags, count, os.pread(self._fd, length, page_id * page_size))

    def _find_bucket(self, page: _Page, name: bytes) -> _Page:
        """The root page of the bucket `name` (a page of its own, or inline in its value)."""
        for _ in range(MAX_DEPTH):
            if page.flags & BRANCH_PAGE:
                if page.count == 0:
                    self._invalid("an empty branch page")
                child = self._branch_element(page, 0)[1]
                for index in range(1, page.count):  # the last child whose first key is <= name
                    key, candidate = self._branch_element(page, index)
                    if key > name:
                        break
                    child = candidate
                page = self._page(child)
                continue
            for index in range(page.count):
                flags, key, value = self._leaf_element(page, index)
                if key == name and flags & BUCKET_LEAF:
                    return self._bucket_root(value)
            self._invalid(f"it has no {name.decode()!r} bucket")
        self._invalid("its bucket tree is deeper than any database's")

    def _bucket_root(self, value: bytes) -> _Page:
        if len(value) < BUCKET_HEADER.size:
            self._invalid("a bucket's header is cut short")
        root_page, _ = BUCKET_HEADER.unpack_from(value)
        if root_page:
            return self._page(root_page)
        inline = value[BUCKET_HEADER.size:]
        if len(inline) < PAGE_HEADER.size:
            self._invalid("an inline bucket's page is cut short")
        _, flags, count, _ = PAGE_HEADER.unpack_from(inline)
        if not flags & LEAF_PAGE:
            self._invalid("an inline bucket's page is not a leaf")
        return _Page(flags, count, inline)

    def _last_key(self, page: _Page) -> bytes | None:
        """The greatest key under `page`: the last element of each page down the right edge."""
        for _ in range(MAX_DEPTH):
            if page.count == 0:
                return None
            if page.flags & BRANCH_PAGE:
                page = self._page(self._branch_element(page, page.count - 1)[1])
                continue
            return self._leaf_element(page, page.count - 1)[1]
        self._invalid("its `key` tree is deeper than any database's")

    def _branch_element(self, page: _Page, index: int) -> tuple[bytes, int]:
        offset = PAGE_HEADER.size + index * BRANCH_ELEMENT.size
        pos, key_size, child = self._element(page, BRANCH_ELEMENT, offset)
        return self._slice(page, offset + pos, key_size), child

    def _leaf_element(self, page: _Page, index: int) -> tuple[int, bytes, bytes]:
        offset = PAGE_HEADER.size + index * LEAF_ELEMENT.size
        flags, pos, key_size, value_size = self._element(page, LEAF_ELEMENT, offset)
        key_at = offset + pos
        return flags, self._slice(page, key_at, key_size), self._slice(page, key_at + key_size, value_size)

    def _element(self, page: _Page, layout: struct.Struct, offset: int) -> tuple[int, ...]:
        if offset + layout.size > len(page.data):
            self._invalid("a page's elements run past its end")
        return layout.unpack_from(page.data, offset)

    def _slice(self, page: _Page, start: int, length: int) -> bytes:
        if start + length > len(page.data):
            self._invalid("a key or value runs past the end of its page")
        return page.data[start:start + length]


def _fnv64a(data: bytes) -> int:
    value = FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return value

"""Backup objects compressed and encrypted on the client (`spec.compression`, `spec.encryption`),
streaming: memory stays flat whatever the snapshot's size. Compression comes first, then
encryption. docs/backup.md ("Compression and encryption") describes the format for people.

An object is one of, told apart by its first bytes (no metadata needed, so a copied object
still restores):
 - a plain etcd snapshot (a bbolt file: it starts with page id 0, eight zero bytes);
 - a gzip stream of the snapshot (`1f 8b`: `gunzip` reads it);
 - the encrypted container below, whose plaintext is the snapshot or its gzip stream.

Encrypted container (AES-256-GCM in fixed-size chunks, the STREAM construction):

    header (29 bytes): magic "EOPYSNAP" | version 1 (1 byte) | compression (1 byte: 0 none, 1 gzip)
                       | chunk size (4 bytes, big-endian) | key id (8 bytes) | nonce prefix (7 random bytes)
    frames:            AES-256-GCM(plaintext chunk) + 16-byte tag, each `chunk size` plaintext bytes
                       except the last (0 to chunk size bytes; an empty plaintext is one empty frame)

Frame i is sealed with nonce = prefix | i (4 bytes, big-endian) | 1 if it is the last frame else 0,
and the whole header as associated data. So a changed header, a changed, dropped, repeated or
reordered frame, a truncation at any byte (even at a frame boundary: the new last frame was not
sealed as last) and bytes appended after the last frame all fail authentication. The key id is
the first 8 bytes of SHA-256("etcd-operator-py backup key id" | key): it tells a wrong key from a
damaged object before any decryption, and never reveals the key.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, ClassVar, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from etcd_common.api.storage_locations import COMPRESSION_GZIP, COMPRESSION_NONE, COMPRESSIONS

ENCRYPTION_AES_256_GCM: Final = "AES-256-GCM"
KEY_BYTES: Final = 32
MAGIC: Final = b"EOPYSNAP"
VERSION: Final = 1
_HEADER = struct.Struct(">8sBBI8s7s")
HEADER_BYTES: Final = _HEADER.size
TAG_BYTES: Final = 16
CHUNK_BYTES: Final = 1024 * 1024
MAX_CHUNK_BYTES: Final = 16 * 1024 * 1024
READ_BYTES: Final = 1024 * 1024
GZIP_MAGIC: Final = b"\x1f\x8b"
GZIP_LEVEL: Final = 6
_COMPRESSION_CODES: Final = {COMPRESSION_NONE: 0, COMPRESSION_GZIP: 1}
_KEY_ID_CONTEXT: Final = b"etcd-operator-py backup key id"
_KEY_ID_BYTES: Final = 8

# Object metadata written next to the encoded object (informational: the object's own first bytes
# say how to decode it). Keys as S3's x-amz-meta-*; ABS stores "-" as "_".
METADATA_COMPRESSION: Final = "compression"
METADATA_ENCRYPTION: Final = "encryption"
METADATA_KEY_ID: Final = "encryption-key-id"


class CodecError(Exception):
    """An object cannot be encoded or decoded; `reason` goes into status."""

    reason: ClassVar[str] = "BackupObjectInvalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KeyInvalid(CodecError):
    """The key's Secret value is not base64 of 32 bytes."""

    reason = "EncryptionKeyInvalid"


class KeyMissing(CodecError):
    """The object is encrypted and no key was given (or its Secret is missing)."""

    reason = "EncryptionKeyMissing"


class KeyWrong(CodecError):
    """The object was encrypted with another key (by its key id)."""

    reason = "EncryptionKeyWrong"


class ObjectCorrupt(CodecError):
    """Failed authentication or decompression: truncated, tampered with, or not our format."""

    reason = "BackupObjectCorrupt"


@dataclass(frozen=True)
class Encoding:
    """How to encode: `compression` (COMPRESSIONS), `key` (32 bytes) or None for no encryption."""

    compression: str = COMPRESSION_NONE
    key: bytes | None = None

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression {self.compression!r} is not one of {', '.join(COMPRESSIONS)}")
        if self.key is not None and len(self.key) != KEY_BYTES:
            raise ValueError(f"an AES-256 key has {KEY_BYTES} bytes, not {len(self.key)}")

    @property
    def identity(self) -> bool:
        return self.compression == COMPRESSION_NONE and self.key is None

    def metadata(self) -> dict[str, str]:
        """The object metadata that says how it was encoded (nothing for a plain snapshot)."""
        result: dict[str, str] = {}
        if self.compression != COMPRESSION_NONE:
            result[METADATA_COMPRESSION] = self.compression.lower()
        if self.key is not None:
            result[METADATA_ENCRYPTION] = ENCRYPTION_AES_256_GCM.lower()
            result[METADATA_KEY_ID] = key_id(self.key)
        return result


@dataclass(frozen=True)
class Decoded:
    """What decoding found: the compression, the key id ("" = not encrypted), the snapshot's size."""

    compression: str
    key_id: str
    size: int

    @property
    def encoded(self) -> bool:
        return self.compression != COMPRESSION_NONE or bool(self.key_id)


def key_id(key: bytes) -> str:
    """A short public name of `key` (hex, 16 characters)."""
    return _key_id_bytes(key).hex()


def _key_id_bytes(key: bytes) -> bytes:
    return hashlib.sha256(_KEY_ID_CONTEXT + key).digest()[:_KEY_ID_BYTES]


def parse_key(text: str, *, where: str) -> bytes:
    """A key as stored in its Secret: base64 of 32 bytes (`openssl rand -base64 32`)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as error:
        raise KeyInvalid(f"{where} is not base64 (expected a 32-byte key, e.g. `openssl rand -base64 32`)") from error
    if len(key) != KEY_BYTES:
        raise KeyInvalid(f"{where} decodes to {len(key)} bytes; an AES-256 key has {KEY_BYTES} "
                         "(e.g. `openssl rand -base64 32`)")
    return key


def is_encoded(head: bytes) -> bool:
    """Whether an object starting with `head` (its first 8 bytes or more) is compressed or encrypted."""
    return head.startswith(MAGIC) or head.startswith(GZIP_MAGIC)


def file_is_encoded(path: str) -> bool:
    with open(path, "rb") as stream:
        return is_encoded(stream.read(len(MAGIC)))


def encode_stream(source: IO[bytes], target: IO[bytes], encoding: Encoding, *,
                  chunk_bytes: int = CHUNK_BYTES, nonce_prefix: bytes | None = None) -> int:
    """Write `source` encoded to `target`; returns the bytes written."""
    if not 0 < chunk_bytes <= MAX_CHUNK_BYTES:
        raise ValueError(f"chunk size {chunk_bytes} is not in 1..{MAX_CHUNK_BYTES}")
    pieces: Iterable[bytes] = _read_pieces(source)
    if encoding.compression == COMPRESSION_GZIP:
        pieces = _gzip(pieces)
    if encoding.key is not None:
        pieces = _seal(pieces, encoding, chunk_bytes, nonce_prefix or os.urandom(7))
    written = 0
    for piece in pieces:
        target.write(piece)
        written += len(piece)
    return written


def encode_file(source_path: str, target_path: str, encoding: Encoding, *, chunk_bytes: int = CHUNK_BYTES) -> int:
    with open(source_path, "rb") as source, open(target_path, "wb") as target:
        return encode_stream(source, target, encoding, chunk_bytes=chunk_bytes)


def decode_stream(source: IO[bytes], key: bytes | None, *, where: str) -> DecodedStream:
    """The decoded bytes of `source` (iterate to the end; then `.facts` holds the size too), as
    the object's first bytes say. Raises KeyMissing or KeyWrong at once (before any byte is
    read past the header), ObjectCorrupt while iterating."""
    head = _read_exactly(source, len(MAGIC))
    compression = COMPRESSION_NONE
    found_key_id = ""
    pieces: Iterable[bytes] = _chain([head], _read_pieces(source))
    if head == MAGIC:
        header = head + _read_exactly(source, HEADER_BYTES - len(MAGIC))
        compression, found_key_id, chunk_bytes, prefix = _parse_header(header, key, where=where)
        assert key is not None
        pieces = _open(_read_pieces(source), key, header, chunk_bytes, prefix, where=where)
    elif head[:2] == GZIP_MAGIC:
        compression = COMPRESSION_GZIP
    return DecodedStream(pieces, compression, found_key_id, where=where)


def decode_file(source_path: str, target_path: str, key: bytes | None, *, where: str) -> Decoded:
    """Decode the object at `source_path` into `target_path` (removed again if decoding fails)."""
    try:
        with open(source_path, "rb") as source, open(target_path, "wb") as target:
            pieces = decode_stream(source, key, where=where)
            for piece in pieces:
                target.write(piece)
            return pieces.facts
    except BaseException:
        if os.path.exists(target_path):
            os.remove(target_path)
        raise


class DecodedStream(Iterator[bytes]):
    """The decoded pieces (gunzipped where the object says so), counted into `facts`."""

    def __init__(self, pieces: Iterable[bytes], compression: str, found_key_id: str, *, where: str) -> None:
        self._compression = compression
        self._key_id = found_key_id
        self._size = 0
        self._inner = iter(pieces)
        if compression == COMPRESSION_GZIP:
            self._inner = _gunzip(pieces, where=where, after_decryption=bool(found_key_id))

    @property
    def facts(self) -> Decoded:
        return Decoded(self._compression, self._key_id, self._size)

    def __next__(self) -> bytes:
        piece = next(self._inner)
        self._size += len(piece)
        return piece


def _parse_header(header: bytes, key: bytes | None, *, where: str) -> tuple[str, str, int, bytes]:
    if len(header) < HEADER_BYTES:
        raise ObjectCorrupt(f"{where} is truncated: {len(header)} bytes, shorter than the encryption header")
    _, version, code, chunk_bytes, found, prefix = _HEADER.unpack(header)
    compressions = {value: name for name, value in _COMPRESSION_CODES.items()}
    if version != VERSION or code not in compressions or not 0 < chunk_bytes <= MAX_CHUNK_BYTES:
        raise ObjectCorrupt(f"{where} has an encryption header this operator cannot read (format {version}, "
                            f"compression {code}, chunk size {chunk_bytes})")
    if key is None:
        raise KeyMissing(f"{where} is encrypted (AES-256-GCM, key id {found.hex()}) and no key was given: name "
                         "the Secret holding it in spec.encryption.secretName")
    if found != _key_id_bytes(key):
        raise KeyWrong(f"{where} was encrypted with key id {found.hex()}; the key given has id {key_id(key)}")
    return compressions[code], found.hex(), chunk_bytes, prefix


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    if counter >= 1 << 32:
        raise ObjectCorrupt("more than 2^32 chunks in one object")
    return prefix + counter.to_bytes(4, "big") + (b"\x01" if last else b"\x00")


def _seal(pieces: Iterable[bytes], encoding: Encoding, chunk_bytes: int, prefix: bytes) -> Iterator[bytes]:
    assert encoding.key is not None
    header = _HEADER.pack(MAGIC, VERSION, _COMPRESSION_CODES[encoding.compression], chunk_bytes,
                          _key_id_bytes(encoding.key), prefix)
    cipher = AESGCM(encoding.key)
    yield header
    counter = 0
    pending: bytes | None = None  # held back until it is known whether another chunk follows
    for chunk in _rechunk(pieces, chunk_bytes):
        if pending is not None:
            yield cipher.encrypt(_nonce(prefix, counter, False), pending, header)
            counter += 1
        pending = chunk
    yield cipher.encrypt(_nonce(prefix, counter, True), pending or b"", header)


def _open(pieces: Iterable[bytes], key: bytes, header: bytes, chunk_bytes: int, prefix: bytes, *,
          where: str) -> Iterator[bytes]:
    cipher = AESGCM(key)
    frames = _rechunk(pieces, chunk_bytes + TAG_BYTES)
    frame = next(frames, b"")
    counter = 0
    while True:
        following = next(frames, None)
        last = following is None
        try:
            yield cipher.decrypt(_nonce(prefix, counter, last), frame, header)
        except InvalidTag as error:
            raise ObjectCorrupt(f"{where} failed authentication at chunk {counter}: truncated, modified or "
                                "reordered since it was written") from error
        if following is None:
            return
        frame = following
        counter += 1


def _gzip(pieces: Iterable[bytes]) -> Iterator[bytes]:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    for piece in pieces:
        if out := compressor.compress(piece):
            yield out
    yield compressor.flush()


def _gunzip(pieces: Iterable[bytes], *, where: str, after_decryption: bool) -> Iterator[bytes]:
    """Decompress one gzip member; its CRC-32 and length are checked by zlib at the end."""
    decompressor = zlib.decompressobj(31)
    damage = "decrypted fine but" if after_decryption else "is"
    try:
        for piece in pieces:
            data = piece
            while data:
                if decompressor.eof:
                    raise ObjectCorrupt(f"{where} {damage} has data after the end of its gzip stream")
                yield decompressor.decompress(data, READ_BYTES)
                data = decompressor.unconsumed_tail
        while not decompressor.eof and (out := decompressor.decompress(b"", READ_BYTES)):
            yield out
    except zlib.error as error:
        raise ObjectCorrupt(f"{where} {damage} not a valid gzip stream: {error}") from error
    if not decompressor.eof:
        raise ObjectCorrupt(f"{where} {damage} a truncated gzip stream")
    if decompressor.unused_data:
        raise ObjectCorrupt(f"{where} {damage} has data after the end of its gzip stream")


def _rechunk(pieces: Iterable[bytes], size: int) -> Iterator[bytes]:
    """`pieces` as chunks of exactly `size` bytes, then the rest; one empty chunk when there is nothing."""
    buffer = bytearray()
    emitted = False
    for piece in pieces:
        buffer += piece
        while len(buffer) >= size:
            yield bytes(buffer[:size])
            del buffer[:size]
            emitted = True
    if buffer or not emitted:
        yield bytes(buffer)


def _read_pieces(source: IO[bytes]) -> Iterator[bytes]:
    while piece := source.read(READ_BYTES):
        yield piece


def _read_exactly(source: IO[bytes], size: int) -> bytes:
    data = bytearray()
    while len(data) < size and (piece := source.read(size - len(data))):
        data += piece
    return bytes(data)


def _chain(*iterables: Iterable[bytes]) -> Iterator[bytes]:
    for iterable in iterables:
        yield from iterable

"""The backup codec (etcd_common.storage.codec): compressed and encrypted objects round-trip at
every size around a chunk boundary, and any truncation, tampering, reordering or wrong key is
refused with a reason, never decoded into something else."""
from __future__ import annotations

import base64
import hashlib
import io
import tracemalloc
from pathlib import Path

import pytest

from etcd_common.storage import codec
from etcd_common.storage.codec import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    HEADER_BYTES,
    MAGIC,
    TAG_BYTES,
    Encoding,
    KeyInvalid,
    KeyMissing,
    KeyWrong,
    ObjectCorrupt,
)

CHUNK = 64  # small chunks: the boundaries are cheap to cross
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
ENCODINGS = {
    "gzip": Encoding(COMPRESSION_GZIP),
    "aes": Encoding(COMPRESSION_NONE, KEY),
    "gzip+aes": Encoding(COMPRESSION_GZIP, KEY),
}


def payload(size: int) -> bytes:
    """Half incompressible, half compressible."""
    half = size // 2
    return hashlib.shake_256(str(size).encode()).digest(half) + b"etcd" * ((size - half) // 4) + b"e" * ((size - half) % 4)


def encode(data: bytes, encoding: Encoding, chunk_bytes: int = CHUNK) -> bytes:
    out = io.BytesIO()
    written = codec.encode_stream(io.BytesIO(data), out, encoding, chunk_bytes=chunk_bytes)
    assert written == len(out.getvalue())
    return out.getvalue()


def decode(data: bytes, key: bytes | None) -> tuple[bytes, codec.Decoded]:
    stream = codec.decode_stream(io.BytesIO(data), key, where="s3://b/k")
    decoded = b"".join(stream)
    return decoded, stream.facts


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK, 3 * 1024 * 1024 + 7])
def test_round_trip(name: str, size: int) -> None:
    encoding = ENCODINGS[name]
    data = payload(size)
    encoded = encode(data, encoding)
    assert encoded != data
    decoded, facts = decode(encoded, encoding.key)
    assert decoded == data
    assert facts.size == size
    assert facts.compression == encoding.compression
    assert facts.key_id == (codec.key_id(KEY) if encoding.key else "")
    assert codec.is_encoded(encoded[:8])
    if encoding.key is not None:
        assert encoded.startswith(MAGIC)
        if size >= 16:
            assert data[:16] not in encoded[HEADER_BYTES:]  # the plaintext does not show


@pytest.mark.parametrize("size", [0, CHUNK, CHUNK + 1])
def test_frames_are_fixed_size_and_the_last_one_is_short_or_full(size: int) -> None:
    encoded = encode(payload(size), Encoding(COMPRESSION_NONE, KEY))
    frames = len(encoded) - HEADER_BYTES
    full, rest = divmod(size, CHUNK)
    expected = full * (CHUNK + TAG_BYTES) + (rest + TAG_BYTES if rest or not full else 0)
    assert frames == expected


def test_default_chunks_round_trip_several_mebibytes_with_flat_memory(tmp_path: Path) -> None:
    source = tmp_path / "snapshot.db"
    with source.open("wb") as out:
        for i in range(24):
            out.write(hashlib.shake_256(bytes([i])).digest(1024 * 1024))
    encoded, decoded = tmp_path / "encoded", tmp_path / "decoded"
    tracemalloc.start()
    try:
        codec.encode_file(str(source), str(encoded), Encoding(COMPRESSION_GZIP, KEY))
        facts = codec.decode_file(str(encoded), str(decoded), KEY, where="test")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoded.read_bytes() == source.read_bytes()
    assert facts.size == 24 * 1024 * 1024
    assert peak < 12 * 1024 * 1024, f"peak {peak} bytes for a 24 MiB snapshot: memory grows with the size"


def test_a_plain_snapshot_passes_through() -> None:
    snapshot = b"\0" * 8 + payload(300)
    decoded, facts = decode(snapshot, None)
    assert decoded == snapshot and not facts.encoded
    assert not codec.is_encoded(snapshot[:8])


def test_gzip_only_is_a_plain_gzip_file() -> None:
    import gzip
    data = payload(1000)
    assert gzip.decompress(encode(data, Encoding(COMPRESSION_GZIP))) == data


def test_nonce_prefix_is_random_per_object() -> None:
    data = payload(200)
    assert encode(data, ENCODINGS["aes"]) != encode(data, ENCODINGS["aes"])


@pytest.mark.parametrize("name", ["aes", "gzip+aes"])
@pytest.mark.parametrize("cut", [1, TAG_BYTES, CHUNK + TAG_BYTES, "frame-boundary", "header"])
def test_truncation_is_detected(name: str, cut: int | str) -> None:
    encoded = encode(payload(10 * CHUNK), ENCODINGS[name])
    if cut == "frame-boundary":
        truncated = encoded[:HEADER_BYTES + 3 * (CHUNK + TAG_BYTES)]  # whole frames, the last one not sealed as last
    elif cut == "header":
        truncated = encoded[:HEADER_BYTES - 1]
    else:
        assert isinstance(cut, int)
        truncated = encoded[:-cut]
    with pytest.raises(ObjectCorrupt):
        decode(truncated, KEY)


def test_only_the_header_is_detected() -> None:
    with pytest.raises(ObjectCorrupt, match="chunk 0"):
        decode(encode(payload(500), ENCODINGS["aes"])[:HEADER_BYTES], KEY)


@pytest.mark.parametrize("offset", [8, 9, 10, 13, 27, HEADER_BYTES, HEADER_BYTES + 5 * (CHUNK + TAG_BYTES) + 3, -1])
def test_tampering_is_detected(offset: int) -> None:
    encoded = bytearray(encode(payload(10 * CHUNK), ENCODINGS["gzip+aes"]))
    encoded[offset] ^= 0x01
    with pytest.raises((ObjectCorrupt, KeyWrong)):
        decode(bytes(encoded), KEY)


def test_reordered_frames_are_detected() -> None:
    encoded = encode(payload(10 * CHUNK), ENCODINGS["aes"])
    frame = CHUNK + TAG_BYTES
    header, frames = encoded[:HEADER_BYTES], encoded[HEADER_BYTES:]
    swapped = header + frames[frame:2 * frame] + frames[:frame] + frames[2 * frame:]
    with pytest.raises(ObjectCorrupt, match="chunk 0"):
        decode(swapped, KEY)


def test_appended_bytes_and_dropped_frames_are_detected() -> None:
    encoded = encode(payload(10 * CHUNK), ENCODINGS["aes"])
    frame = CHUNK + TAG_BYTES
    with pytest.raises(ObjectCorrupt):
        decode(encoded + encoded[-frame:], KEY)
    with pytest.raises(ObjectCorrupt):
        decode(encoded[:HEADER_BYTES] + encoded[HEADER_BYTES + frame:], KEY)


def test_a_truncated_or_extended_gzip_object_is_detected() -> None:
    encoded = encode(payload(1000), ENCODINGS["gzip"])
    with pytest.raises(ObjectCorrupt, match="truncated"):
        decode(encoded[:-4], None)
    with pytest.raises(ObjectCorrupt, match="after the end"):
        decode(encoded + b"more", None)


def test_wrong_key_and_missing_key_are_told_apart_before_decrypting() -> None:
    encoded = encode(payload(500), ENCODINGS["gzip+aes"])
    with pytest.raises(KeyWrong, match=f"key id {codec.key_id(KEY)}.*has id {codec.key_id(OTHER_KEY)}"):
        codec.decode_stream(io.BytesIO(encoded), OTHER_KEY, where="s3://b/k")
    with pytest.raises(KeyMissing, match="spec.encryption.secretName"):
        codec.decode_stream(io.BytesIO(encoded), None, where="s3://b/k")
    assert KeyWrong.reason == "EncryptionKeyWrong" and KeyMissing.reason == "EncryptionKeyMissing"


def test_the_key_id_names_the_key_without_revealing_it() -> None:
    key_id = codec.key_id(KEY)
    assert len(key_id) == 16 and key_id != codec.key_id(OTHER_KEY)
    assert key_id not in KEY.hex() and key_id != hashlib.sha256(KEY).hexdigest()[:16]
    assert Encoding(COMPRESSION_GZIP, KEY).metadata() == {
        "compression": "gzip", "encryption": "aes-256-gcm", "encryption-key-id": key_id}
    assert Encoding().metadata() == {} and Encoding().identity


def test_a_failed_decode_leaves_no_file(tmp_path: Path) -> None:
    source = tmp_path / "object"
    source.write_bytes(encode(payload(500), ENCODINGS["aes"])[:-1])
    target = tmp_path / "snapshot.db"
    with pytest.raises(ObjectCorrupt):
        codec.decode_file(str(source), str(target), KEY, where="test")
    assert not target.exists()


@pytest.mark.parametrize("text, problem", [
    (base64.b64encode(bytes(range(100, 132))).decode() + "\n", None),
    (base64.b64encode(b"x" * 16).decode(), "16 bytes"),
    ("not base64!", "not base64"),
    ("", "0 bytes"),
])
def test_key_parsing(text: str, problem: str | None) -> None:
    if problem is None:
        assert len(codec.parse_key(text, where="key")) == 32
    else:
        with pytest.raises(KeyInvalid, match=problem):
            codec.parse_key(text, where="key")


def test_encoding_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Encoding("Zstd")
    with pytest.raises(ValueError):
        Encoding(COMPRESSION_NONE, b"short")

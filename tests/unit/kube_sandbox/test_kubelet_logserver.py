"""`tailLines` support of the container log server."""
from __future__ import annotations

from pathlib import Path

import pytest

from kube_sandbox.kubelet.logserver import tail_offset


@pytest.mark.parametrize("content, lines, expected", [
    (b"a\nb\nc\n", 1, b"c\n"),
    (b"a\nb\nc\n", 2, b"b\nc\n"),
    (b"a\nb\nc\n", 10, b"a\nb\nc\n"),
    (b"a\nb\nc", 1, b"c"),
    (b"a\nb\nc", 0, b""),
    (b"", 3, b""),
])
def test_tail_offset(tmp_path: Path, content: bytes, lines: int, expected: bytes) -> None:
    path = tmp_path / "log"
    path.write_bytes(content)
    assert content[tail_offset(path, lines):] == expected

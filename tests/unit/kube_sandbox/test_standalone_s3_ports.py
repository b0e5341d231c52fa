"""The standalone SeaweedFS's ports (kube_sandbox/s3.py): weed refuses a port that equals another
server's port + 10000 (its gRPC port), so such a pick is drawn again, as are duplicates."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube_sandbox import s3


def _picks(*ports: int) -> Iterator[int]:
    yield from ports


def test_a_port_equal_to_another_plus_ten_thousand_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    picks = _picks(30000, 30001, 30002, 30003, 30004, 40000,  # 40000 is 30000's gRPC port
                   30000, 30001, 30002, 30003, 30004, 30005)
    monkeypatch.setattr(s3, "free_port", lambda below: next(picks))
    assert s3._weed_ports() == [30000, 30001, 30002, 30003, 30004, 30005]


def test_a_port_picked_twice_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    picks = _picks(30000, 30000, 30002, 30003, 30004, 30005,
                   30010, 30011, 30012, 30013, 30014, 30015)
    monkeypatch.setattr(s3, "free_port", lambda below: next(picks))
    assert s3._weed_ports() == [30010, 30011, 30012, 30013, 30014, 30015]

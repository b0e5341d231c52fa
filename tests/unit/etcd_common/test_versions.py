"""etcd release numbers (`etcd_common.api.versions`): parsed with or without `v`, ordered numerically."""
from __future__ import annotations

import pytest

from etcd_common.api.versions import EtcdVersion


@pytest.mark.parametrize("text, version", [
    ("3.5.1", EtcdVersion(3, 5, 1)),
    ("v3.4.23", EtcdVersion(3, 4, 23)),
    (" 3.5.10 ", EtcdVersion(3, 5, 10)),
    ("3.5", None),
    ("3.5.1-rc.0", None),
])
def test_version_parse(text: str, version: EtcdVersion | None) -> None:
    assert EtcdVersion.parse(text) == version


def test_versions_order_numerically() -> None:
    assert EtcdVersion(3, 5, 10) > EtcdVersion(3, 5, 9) > EtcdVersion(3, 4, 23)

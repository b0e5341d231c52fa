"""Secret/configMap volume files: items, modes, and refusal of paths that escape the volume."""
from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from kube_sandbox.kubelet.atomic_writer import write_atomically
from kube_sandbox.kubelet.environment import ContainerConfigError
from kube_sandbox.kubelet.kube_api import ApiError, Conflict, Forbidden, Gone, NotFound, Unavailable, error_for
from kube_sandbox.kubelet.volumes import VolumeNotReady, decode_config_map, decode_secret, select_items


def test_all_keys_with_the_default_mode(tmp_path: Path) -> None:
    data = decode_secret({"data": {"a": base64.b64encode(b"1").decode(), "b": base64.b64encode(b"2").decode()}})
    write_atomically(tmp_path, select_items(data, None, 0o600, "Secret ns/s", optional=False))
    assert (tmp_path / "a").read_bytes() == b"1" and (tmp_path / "b").read_bytes() == b"2"
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o600


def test_items_select_keys_paths_and_modes(tmp_path: Path) -> None:
    data = decode_config_map({"data": {"a": "1", "b": "2"}, "binaryData": {"c": base64.b64encode(b"\0").decode()}})
    files = select_items(data, [{"key": "a", "path": "sub/dir/a.conf", "mode": 0o400}, {"key": "c", "path": "c"}],
                         0o644, "ConfigMap ns/c", optional=False)
    write_atomically(tmp_path, files)
    assert (tmp_path / "sub/dir/a.conf").read_text() == "1"
    assert stat.S_IMODE((tmp_path / "sub/dir/a.conf").stat().st_mode) == 0o400
    assert (tmp_path / "c").read_bytes() == b"\0"
    assert not (tmp_path / "b").exists()


def test_missing_item_key_waits_unless_optional() -> None:
    with pytest.raises(VolumeNotReady, match="couldn't find key x in Secret ns/s"):
        select_items({}, [{"key": "x", "path": "x"}], 0o644, "Secret ns/s", optional=False)
    assert select_items({}, [{"key": "x", "path": "x"}], 0o644, "Secret ns/s", optional=True) == {}


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "..data", "..hidden/x"])
def test_paths_may_not_leave_the_volume(tmp_path: Path, path: str) -> None:
    with pytest.raises(ContainerConfigError):
        write_atomically(tmp_path / "vol", {path: (b"x", 0o644)})


@pytest.mark.parametrize("status, error", [
    (403, Forbidden), (404, NotFound), (409, Conflict), (410, Gone), (500, Unavailable), (429, Unavailable),
    (0, Unavailable), (422, ApiError),
])
def test_http_status_maps_to_errors(status: int, error: type[ApiError]) -> None:
    raised = error_for(status, b'{"kind": "Status", "reason": "Why", "message": "because"}')
    assert type(raised) is error and raised.status == status and "because" in str(raised)

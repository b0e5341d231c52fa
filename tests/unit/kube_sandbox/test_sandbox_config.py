"""SandboxConfig's ports and the object stores' addresses: every port distinct, all shifted by
$SANDBOX_PORT_OFFSET, the stores on loopback with their state under the state dir."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from kube_sandbox import binaries
from kube_sandbox.config import AZURITE_ACCOUNT, SandboxConfig
from kube_sandbox.stores import STORE_NAMES, sandbox_stores, store_named

# `weed mini` serves S3 on s3_port and its master, volume, filer, webdav and admin on the next five,
# each also on port + 10000 (gRPC).
WEED_PORTS = 6
WEED_GRPC_SHIFT = 10000


def ports_of(config: SandboxConfig) -> dict[str, int]:
    return {f.name: getattr(config, f.name) for f in fields(config) if f.name.endswith("_port")}


def taken_ports(config: SandboxConfig) -> list[int]:
    """Every port the sandbox listens on, SeaweedFS's extra ones included."""
    weed = [config.s3_port + i for i in range(WEED_PORTS)]
    others = [port for name, port in ports_of(config).items() if name != "s3_port"]
    return [*others, *weed, *(port + WEED_GRPC_SHIFT for port in weed)]


def test_default_ports_are_distinct_including_seaweedfs_extra_ports(tmp_path: Path) -> None:
    config = SandboxConfig(state_dir=tmp_path)
    taken = taken_ports(config)
    assert len(taken) == len(set(taken)), sorted(taken)
    assert {"abs_port", "gcs_port"} <= set(ports_of(config))


def test_the_offset_shifts_every_port_the_stores_included(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_DIR", str(tmp_path))
    monkeypatch.setenv("SANDBOX_PORT_OFFSET", "3000")
    monkeypatch.delenv("SANDBOX_POD_IP_PREFIX", raising=False)
    shifted = SandboxConfig.from_env()
    defaults = SandboxConfig(state_dir=tmp_path)
    assert ports_of(shifted) == {name: port + 3000 for name, port in ports_of(defaults).items()}
    assert shifted.abs_endpoint == f"http://127.0.0.1:{defaults.abs_port + 3000}/{AZURITE_ACCOUNT}"
    assert shifted.gcs_endpoint == f"http://127.0.0.1:{defaults.gcs_port + 3000}"
    # A second sandbox at offset 1000 or 2000 shares no port with the first.
    for offset in (1000, 2000):
        monkeypatch.setenv("SANDBOX_PORT_OFFSET", str(offset))
        assert not set(taken_ports(SandboxConfig.from_env())) & set(taken_ports(defaults))


def test_the_stores_listen_on_loopback_with_state_and_logs_in_the_sandbox(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binaries, "weed", lambda: Path("/opt/weed"))
    monkeypatch.setattr(binaries, "emulator", lambda program, tool: Path(f"/opt/{program}"))
    config = SandboxConfig(state_dir=tmp_path, abs_port=20001, gcs_port=20002)
    stores = sandbox_stores(config)
    assert tuple(stores) == STORE_NAMES
    assert [(s.port, s.endpoint) for s in stores.values()] == [
        (config.s3_port, config.s3_endpoint), (20001, config.abs_endpoint), (20002, config.gcs_endpoint)]
    abs_argv, gcs_argv = stores["abs"].process.argv, stores["gcs"].process.argv
    assert abs_argv[:5] == ["/opt/azurite-blob", "--blobHost", "127.0.0.1", "--blobPort", "20001"]
    assert abs_argv[abs_argv.index("--location") + 1] == str(tmp_path / "abs" / "data")
    assert "--disableTelemetry" in abs_argv  # else Azurite connects to 169.254.169.254
    assert gcs_argv[0] == "/opt/fake-gcs-server"
    assert gcs_argv[gcs_argv.index("-host") + 1] == "127.0.0.1" and gcs_argv[gcs_argv.index("-port") + 1] == "20002"
    assert gcs_argv[gcs_argv.index("-filesystem-root") + 1] == str(tmp_path / "gcs" / "data")
    assert all(store.process.log_file.parent == config.logs_dir for store in stores.values())
    assert not any(store.stopped for store in stores.values())


def test_an_unknown_store_name_is_refused_naming_the_known_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binaries, "weed", lambda: Path("/opt/weed"))
    monkeypatch.setattr(binaries, "emulator", lambda program, tool: Path(f"/opt/{program}"))
    stores = sandbox_stores(SandboxConfig(state_dir=tmp_path))
    assert store_named(stores, "gcs") is stores["gcs"]
    with pytest.raises(ValueError, match="no store 'oss'; the sandbox's stores: s3, abs, gcs"):
        store_named(stores, "oss")


def test_a_missing_emulator_fails_with_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(binaries, "weed", lambda: Path("/opt/weed"))
    monkeypatch.setattr(binaries, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(binaries.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(binaries.MissingBinary, match="azurite-blob not found.*install-tool-binaries.sh"):
        binaries.object_store_programs()

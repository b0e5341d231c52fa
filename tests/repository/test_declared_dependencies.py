"""Every third-party module the shipped packages import is a declared dependency (install_requires),
so an install from setup.cfg alone does not fail on import; and every declared lower bound is the
version tests/lowest-versions.txt pins (which the unit tests run against, see
tests/integration/packaging/test_lowest_versions.py)."""
from __future__ import annotations

import ast
import configparser
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("etcd_operator", "etcd_common", "kube_adapter", "operator_runtime", "backup_operator", "restore_operator")
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml", "prometheus_client": "prometheus-client",
                 # namespace packages: azure.core and azure.storage.blob come with azure-storage-blob;
                 # google.cloud.storage, google.api_core, google.auth and google.oauth2 with google-cloud-storage
                 "azure": "azure-storage-blob", "google": "google-cloud-storage"}


def _imported_modules() -> set[str]:
    modules: set[str] = set()
    for package in SHIPPED:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    modules.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m not in SHIPPED}


def _declared() -> set[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].strip().splitlines()
    return {re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0].lower() for line in lines if line.strip()}


def test_every_imported_third_party_module_is_declared() -> None:
    missing = sorted(m for m in _imported_modules() if DISTRIBUTIONS.get(m, m).lower() not in _declared())
    assert not missing, f"imported but not in setup.cfg install_requires: {missing}"


def _lower_bounds() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    bounds: dict[str, str] = {}
    for line in config["options"]["install_requires"].strip().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower()
        lower = re.search(r">=\s*([0-9][^,;\s]*)", line)
        assert lower, f"{line!r} has no lower bound: which oldest release works would be untested"
        bounds[name] = lower.group(1)
    return bounds


def _pinned_lowest() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "tests" / "lowest-versions.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_every_lower_bound_is_the_tested_lowest_version() -> None:
    bounds, pins = _lower_bounds(), _pinned_lowest()
    assert sorted(bounds) == sorted(pins), "tests/lowest-versions.txt must pin every install_requires entry"
    for name, lower in bounds.items():
        padded = _release(lower) + (0,) * (3 - len(_release(lower)))
        assert _release(pins[name]) == padded, f"{name}: setup.cfg allows >={lower}, the lowest tested is {pins[name]}"

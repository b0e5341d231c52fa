"""Every third-party module the shipped packages import is a declared dependency (install_requires),
so an install from setup.cfg alone does not fail on import."""
from __future__ import annotations

import ast
import configparser
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("etcd_operator", "etcd_common", "kube_adapter", "operator_runtime", "backup_operator", "restore_operator")
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml", "prometheus_client": "prometheus-client"}


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

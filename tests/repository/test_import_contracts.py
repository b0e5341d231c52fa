"""The layers hold: `lint-imports` checks the contracts in setup.cfg ([importlinter]), every
top-level package of the checkout is one it analyses, and each contract can fail: a deliberate
violation of it, in a copy of the checkout, is refused."""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Outside the contracts: the tests may import everything.
UNCONSTRAINED_PACKAGES = {"tests"}


def _lint_imports() -> str:
    beside_python = Path(sys.executable).parent / "lint-imports"
    found = str(beside_python) if beside_python.exists() else shutil.which("lint-imports")
    assert found, "lint-imports not found: install the test extras (pip install -e '.[test]')"
    return found


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [_lint_imports(), "--config", str(REPO / "setup.cfg"), "--no-cache"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, f"import contracts broken:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout


def test_every_top_level_package_is_analysed() -> None:
    """A new package (backup_operator/, restore_operator/) must join root_packages, or the
    contracts would not look at it at all."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    analysed = set(config["importlinter"]["root_packages"].split())
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")} - UNCONSTRAINED_PACKAGES
    assert packages <= analysed, f"add {sorted(packages - analysed)} to root_packages in setup.cfg [importlinter]"


# One deliberate violation per contract: (module to change, the import added, the contract it breaks).
VIOLATIONS = [
    # At the top of etcd_common: at its bottom, the chain back into etcd_common would break etcd-common-layers too.
    ("etcd_common/seed/program.py", "import etcd_operator.planning", "layers"),
    ("kube_adapter/errors.py", "import operator_runtime.worker", "layers"),
    ("backup_operator/keys.py", "import restore_operator.planning", "layers"),
    ("etcd_operator/status.py", "import kubernetes.client", "kubernetes-only-in-adapter"),
    ("restore_operator/planning.py", "import kube_sandbox.config", "nothing-shipped-imports-the-sandbox"),
    ("etcd_operator/status.py", "import benchmarks.floor", "nothing-shipped-imports-the-sandbox"),
    # The planner: a rule that runs etcdctl, one that asks Kubernetes, a module it reads that runs a process.
    ("etcd_operator/planning/removal.py", "import etcd_common.etcd.etcdctl", "pure-planning"),
    ("etcd_operator/planning/membership.py", "import kube_adapter.errors", "pure-planning"),
    ("etcd_operator/observed.py", "import subprocess", "pure-planning"),
    ("kube_sandbox/config.py", "import etcd_common.api.constants", "sandbox-imports-nothing-shipped"),
    ("etcd_common/api/constants.py", "import etcd_common.etcd.alarms", "etcd-common-layers"),
    ("etcd_common/storage/s3.py", "import etcd_common.etcd.snapshot_integrity", "etcd-common-layers"),
    ("etcd_common/api/fields.py", "import etcd_common.api.etcd_restore", "etcd-common-api-layers"),
    ("etcd_common/api/etcd_backup.py", "import etcd_common.api.etcd_cluster", "etcd-common-api-layers"),
]


def _contract_names() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    prefix = "importlinter:contract:"
    return {section[len(prefix):]: config[section]["name"] for section in config.sections()
            if section.startswith(prefix)}


def test_every_contract_has_a_violation_below() -> None:
    assert {contract for _, _, contract in VIOLATIONS} == set(_contract_names())


@pytest.mark.parametrize("module, added_import, contract", VIOLATIONS,
                         ids=[f"{c}:{m}" for m, _, c in VIOLATIONS])
def test_a_deliberate_violation_breaks_its_contract(
        tmp_path: Path, module: str, added_import: str, contract: str) -> None:
    """The contracts can fail: a copy of the checkout with one forbidden import added is refused,
    by exactly the contract that forbids it."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    for package in config["importlinter"]["root_packages"].split():
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
    changed = tmp_path / module
    changed.write_text(changed.read_text() + f"\n{added_import}  # deliberate violation\n")

    result = subprocess.run(
        [_lint_imports(), "--config", str(tmp_path / "setup.cfg"), "--no-cache"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    output = " ".join(result.stdout.split())  # lint-imports wraps long contract names
    assert result.returncode != 0, f"{added_import} in {module} was not refused:\n{result.stdout}"
    assert f"{_contract_names()[contract]} BROKEN" in output, output
    assert "1 broken" in output, output
    assert str(tmp_path) in _analysed_location(tmp_path, module), "lint-imports analysed another copy"


def _analysed_location(root: Path, module: str) -> str:
    """Where the interpreter lint-imports runs under finds `module`'s package, given root first on
    the path (the checkout itself may be installed in editable mode)."""
    package = module.split("/")[0]
    result = subprocess.run(
        [sys.executable, "-c", f"import {package}, sys; sys.stdout.write({package}.__file__)"],
        cwd=root, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)},
    )
    return result.stdout

"""The operators' image (Dockerfile) and `pip install .` hold exactly the shipped packages: every
console script of setup.cfg is of one of them, and the test infrastructure (the sandbox, the
benchmarks) is not installed."""
from __future__ import annotations

import configparser
import re

import setuptools

from etcd_common.api.constants import DEFAULT_VERSION
from etcd_common.seed.pod import LOCAL_PROGRAM, SEED_PROGRAM
from kube_sandbox.config import CHECKOUT_DIR

SHIPPED_PACKAGES = {"kube_adapter", "operator_runtime", "etcd_common", "etcd_operator", "backup_operator",
                    "restore_operator"}


def _console_scripts() -> dict[str, str]:
    """script name -> top-level package of its entry point."""
    config = configparser.ConfigParser()
    config.read(CHECKOUT_DIR / "setup.cfg")
    scripts = {}
    for line in config["options.entry_points"]["console_scripts"].strip().splitlines():
        name, target = (part.strip() for part in line.split("="))
        scripts[name] = target.split(".")[0]
    return scripts


def _dockerfile() -> str:
    return (CHECKOUT_DIR / "Dockerfile").read_text()


def test_the_image_copies_exactly_the_shipped_packages() -> None:
    copied = set(re.findall(r"^COPY (\w+) \./\1$", _dockerfile(), flags=re.MULTILINE))
    assert copied == SHIPPED_PACKAGES


def test_every_console_script_is_of_a_shipped_package() -> None:
    left_out = {name: package for name, package in _console_scripts().items() if package not in SHIPPED_PACKAGES}
    assert not left_out, f"console scripts of packages the image leaves out: {left_out}"


def test_pip_install_ships_only_the_operators() -> None:
    """setup.cfg's package discovery, as setuptools runs it for `pip install .`, finds the shipped
    packages and their subpackages, and nothing of the test infrastructure."""
    config = configparser.ConfigParser()
    config.read(CHECKOUT_DIR / "setup.cfg")
    exclude = config["options.packages.find"]["exclude"].split()
    found = set(setuptools.find_packages(str(CHECKOUT_DIR), exclude=exclude))
    assert {name.split(".")[0] for name in found} == SHIPPED_PACKAGES, sorted(found)


def test_the_entry_point_and_the_manifests_commands_are_shipped_scripts() -> None:
    shipped = {name for name, package in _console_scripts().items() if package in SHIPPED_PACKAGES}
    entry = re.search(r'^ENTRYPOINT \["([\w-]+)"\]', _dockerfile(), flags=re.MULTILINE)
    assert entry is not None and entry.group(1) in shipped
    commands: set[str] = set()
    for manifest in [*(CHECKOUT_DIR / "deploy").glob("*.yaml"), *(CHECKOUT_DIR / "examples").glob("*.yaml")]:
        commands |= set(re.findall(r'command:\s*\[\s*"?(etcd-[\w-]+)', manifest.read_text()))
        commands |= set(re.findall(r'command:\s*\n\s*-\s*"?(etcd-[\w-]+)', manifest.read_text()))
    assert commands, "no manifest runs one of the image's commands"
    assert commands <= shipped, commands - shipped
    # The restore init containers of seed pods (and the staging pods) run them from the image.
    assert {SEED_PROGRAM, LOCAL_PROGRAM} <= shipped


def test_the_base_images_are_build_arguments_defaulting_to_the_public_ones() -> None:
    """scripts/build-image.sh passes local stand-ins for them; the etcd default is the operator's
    default version (the image's etcdctl/etcdutl: tests/integration/packaging/test_image.py)."""
    arguments = dict(re.findall(r"^ARG (\w+)=(\S+)$", _dockerfile(), flags=re.MULTILINE))
    assert arguments == {"ETCD_IMAGE": f"gcr.io/etcd-development/etcd:v{DEFAULT_VERSION}",
                         "PYTHON_IMAGE": "python:3.11-slim-bookworm"}
    assert re.findall(r"^FROM (\S+)", _dockerfile(), flags=re.MULTILINE) == ["${ETCD_IMAGE}", "${PYTHON_IMAGE}"]

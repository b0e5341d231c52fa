"""The repository of the image the operators run from (OPERATOR_IMAGE, set by deploy/ and the chart)
is trusted by default: restores and recoveries run that same image as their fetch image, wherever
the image was built or relocated to."""
from __future__ import annotations

import pytest

from etcd_common.api.images import (
    DEFAULT_TRUSTED_REPOSITORIES,
    parse_trusted_repositories,
    untrusted_image_problem,
)
from etcd_operator.settings import parse_settings as operator_settings
from restore_operator.settings import parse_settings as restore_settings

DEFAULTS = ",".join(DEFAULT_TRUSTED_REPOSITORIES)


@pytest.mark.parametrize("operator_image", [
    "localhost/team/etcd-operator-py:0.1.0",                # built on the node under another name
    "registry.example.com/team/etcd-operator-py:0.1.0",     # relocated to the user's registry
    "registry.example.com:5000/etcd-operator-py@sha256:" + "a" * 64,
])
def test_the_operators_own_image_is_trusted_as_its_fetch_image(operator_image: str) -> None:
    assert untrusted_image_problem("the fetch image", operator_image, parse_trusted_repositories(DEFAULTS)) is not None
    trusted = parse_trusted_repositories(DEFAULTS, operator_image)
    assert untrusted_image_problem("the fetch image", operator_image, trusted) is None
    # Only that repository: another one of the same registry is not.
    assert untrusted_image_problem("the fetch image", "registry.example.com/other/tool:1", trusted) is not None


def test_an_operator_image_already_trusted_is_not_listed_twice() -> None:
    assert parse_trusted_repositories("a.example/", "a.example/team/op:1") == ("a.example/",)
    assert parse_trusted_repositories("a.example/etcd", "") == ("a.example/etcd",)


@pytest.mark.parametrize("parse", [operator_settings, restore_settings])
def test_both_operators_trust_the_image_they_run_from(monkeypatch: pytest.MonkeyPatch, parse: object) -> None:
    monkeypatch.delenv("TRUSTED_REPOSITORIES", raising=False)
    monkeypatch.setenv("OPERATOR_IMAGE", "registry.example.com/team/etcd-operator-py:1.2.3")
    settings = parse([])  # type: ignore[operator]
    assert settings.trusted_repositories == (*DEFAULT_TRUSTED_REPOSITORIES, "registry.example.com/team/etcd-operator-py")
    flagged = parse(["--operator-image=localhost/team/etcd-operator-py:0.1.0"])  # type: ignore[operator]
    assert flagged.trusted_repositories[-1] == "localhost/team/etcd-operator-py"


def test_the_nodes_own_copy_of_a_trusted_repository_is_trusted_but_not_the_other_way_round() -> None:
    """`make demo` runs the built image as `localhost/etcd-operator-py` while an operator deployed
    with the manifests' `etcd-operator-py` trusts that name: restores across the two run (issue 41,
    finding 11). A bare name is not trusted for its `localhost/` entry: it may come from a registry."""
    defaults = parse_trusted_repositories(DEFAULTS)
    assert untrusted_image_problem("spec.restore.fetchImage", "localhost/etcd-operator-py:0.1.0", defaults) is None
    assert untrusted_image_problem("spec.repository", "localhost/quay.io/coreos/etcd", defaults) is None
    assert untrusted_image_problem("the fetch image", "localhost/other-tool:1", defaults) is not None
    assert untrusted_image_problem("the fetch image", "localhostx/etcd-operator-py:1", defaults) is not None
    local_only = parse_trusted_repositories("localhost/etcd-operator-py")
    assert untrusted_image_problem("the fetch image", "etcd-operator-py:0.1.0", local_only) is not None
    assert untrusted_image_problem("the fetch image", "localhost/etcd-operator-py:0.1.0", local_only) is None

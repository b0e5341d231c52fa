"""docs/reference/api.md is what tests/docs/api_reference.py renders from the CRDs in crds/: a
changed CRD without the regenerated reference fails here."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.docs import api_reference


def test_api_reference_is_generated_from_the_current_crds() -> None:
    assert api_reference.OUTPUT.read_text() == api_reference.render(), (
        "docs/reference/api.md is out of date: run `python -m tests.docs.api_reference`")


def test_every_schema_field_is_in_the_reference() -> None:
    page = api_reference.OUTPUT.read_text()
    for name in api_reference.CRD_FILES:
        crd = yaml.safe_load((api_reference.CRDS / name).read_text())
        [version] = crd["spec"]["versions"]
        schema = version["schema"]["openAPIV3Schema"]
        for part in ("spec", "status"):
            for path, _, _ in api_reference.fields(schema["properties"][part], part):
                assert f"| `{path}` |" in page, path


def test_check_mode_reports_a_stale_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "api.md"
    stale.write_text("# stale\n")
    monkeypatch.setattr(api_reference, "OUTPUT", stale)
    assert api_reference.main(["--check"]) == 1
    stale.write_text(api_reference.render())
    assert api_reference.main(["--check"]) == 0

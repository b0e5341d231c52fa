"""The project's example manifests with their `<placeholders>` filled in, as a user fills them:
every placeholder the example has must be given, and nothing else is changed."""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from kube_sandbox.config import CHECKOUT_DIR

PLACEHOLDER = re.compile(r"<[a-z][a-z0-9-]*>")


def filled_example(name: str, values: Mapping[str, str]) -> str:
    """examples/`name` with each `<placeholder>` replaced by values["<placeholder>"]; AssertionError
    when a value names no placeholder of the example or one is left in a field (comments may name
    them)."""
    text = (CHECKOUT_DIR / "examples" / name).read_text()
    for placeholder, value in values.items():
        assert placeholder in text, f"examples/{name} has no placeholder {placeholder}"
        text = text.replace(placeholder, value)
    left = sorted({found for document in yaml.safe_load_all(text) for string in _strings(document)
                   for found in PLACEHOLDER.findall(string)})
    assert not left, f"examples/{name}: placeholders not filled: {left}"
    return text


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)

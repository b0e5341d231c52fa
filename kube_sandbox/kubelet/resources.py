"""Resource quantities: what the Node advertises and how `resourceFieldRef` values are computed."""
from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

# Generous on purpose: nothing schedules by resources here, but quota/limit-aware code reads them.
NODE_CAPACITY: dict[str, str] = {
    "cpu": "32",
    "memory": "128Gi",
    "pods": "1000",
    "ephemeral-storage": "500Gi",
}

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>[a-zA-Z]*|[eE][+-]?\d+)$")


class InvalidQuantity(ValueError):
    pass


def parse_quantity(text: str | int | float) -> Decimal:
    """Kubernetes quantity (`100m`, `1Gi`, `2e3`, `1.5`) -> Decimal in base units."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise InvalidQuantity(f"invalid quantity {text!r}")
    number = Decimal(match.group("number"))
    suffix = match.group("suffix")
    if suffix in _BINARY_SUFFIXES:
        return number * _BINARY_SUFFIXES[suffix]
    if suffix in _DECIMAL_SUFFIXES:
        return number * _DECIMAL_SUFFIXES[suffix]
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    raise InvalidQuantity(f"invalid quantity suffix in {text!r}")


def resource_field_value(container: dict[str, Any], resource: str, divisor: str | None = None) -> str:
    """Value of a `resourceFieldRef` (e.g. `limits.memory`): the container's setting, else the
    node's allocatable amount, divided by `divisor` and rounded up like the real kubelet."""
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise InvalidQuantity(f"unsupported resource {resource!r}")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(name)
    if value is None and kind == "requests":
        value = (resources.get("limits") or {}).get(name)
    if value is None:
        value = NODE_CAPACITY.get(name, "0") if kind == "limits" else "0"
    amount = parse_quantity(value) / parse_quantity(divisor or "1")
    return str(math.ceil(amount))

"""The bottom of the API: typed reads of raw API dicts for the parsers at the edge, where every wrong
shape raises the parser's own `SpecError` class naming the field by its path in the manifest
(`spec.s3.path`), and the identity every parsed object carries from its metadata."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JsonDict = Mapping[str, Any]


class SpecError(ValueError):
    """The spec cannot be run; `reason` says what to change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ObjectIdentity:
    """What every parsed object carries from its metadata."""

    name: str
    namespace: str
    uid: str
    generation: int


def object_identity(obj: JsonDict) -> ObjectIdentity:
    raw = obj.get("metadata")
    metadata: JsonDict = raw if isinstance(raw, Mapping) else {}
    generation = metadata.get("generation")
    return ObjectIdentity(
        name=str(metadata.get("name") or ""),
        namespace=str(metadata.get("namespace") or "default"),
        uid=str(metadata.get("uid") or ""),
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
    )


class FieldReader:
    """One object of a manifest (`where` is its path, e.g. "spec.s3"); absent fields read as
    their zero value unless `required`."""

    def __init__(self, raw: Any, where: str, error: type[SpecError]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise error(f"{where} must be an object, got {_type_name(raw)}")
        self.raw: JsonDict = raw
        self.where = where
        self.error = error

    def path(self, key: str) -> str:
        return f"{self.where}.{key}"

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def string(self, key: str, *, required: bool = False) -> str:
        value = self.raw.get(key)
        if value is None or (required and value == ""):
            if required:
                raise self.error(f"{self.path(key)} is required")
            return ""
        if not isinstance(value, str):
            raise self.error(f"{self.path(key)} must be a string, got {_type_name(value)} {value!r}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.raw.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.error(f"{self.path(key)} must be true or false, got {_type_name(value)} {value!r}")
        return value

    def integer(self, key: str, *, minimum: int = 0) -> int:
        value = self.raw.get(key)
        if value is None:
            return 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(f"{self.path(key)} must be an integer, got {_type_name(value)} {value!r}")
        if value < minimum:
            raise self.error(f"{self.path(key)} must be at least {minimum}, got {value}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(f"{self.path(key)} must be a list of strings, got {value!r}")
        return tuple(value)

    def child(self, key: str) -> FieldReader | None:
        """The sub-object `key`, or None when absent."""
        value = self.raw.get(key)
        return None if value is None else FieldReader(value, self.path(key), self.error)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__

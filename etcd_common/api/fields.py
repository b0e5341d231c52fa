"""The bottom of the API: typed reads of raw API dicts for the parsers at the edge, where every wrong
shape raises the parser's own `SpecError` class naming the field by its path in the manifest
(`spec.s3.path`), and the identity every parsed object carries from its metadata."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

JsonDict = Mapping[str, Any]
SpecT = TypeVar("SpecT")


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


def spec_or_error(raw_spec: Any, parse: Callable[[Any], SpecT],
                  error: type[SpecError]) -> tuple[SpecT | None, str | None]:
    """`parse(raw_spec)` and None, or None and the reason when it raises `error`: a whole object's
    parser does not raise for its spec, so the operator can report the problem in status."""
    try:
        return parse(raw_spec), None
    except error as problem:
        return None, problem.reason


class FieldReader:
    """One object of a manifest (`where` is its path, e.g. "spec.s3"); absent fields read as
    their zero value unless `required`. A subclass may word how a wrong value is shown
    (`type_of`, `shown`); sub-objects are read by the same class."""

    def __init__(self, raw: Any, where: str, error: type[SpecError]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise error(f"{where} must be an object, got {self.type_of(raw)}")
        self.raw: JsonDict = raw
        self.where = where
        self.error = error

    @staticmethod
    def type_of(value: Any) -> str:
        """A wrong value's type, as errors name it: "string", "integer", "object", ..."""
        return _type_name(value)

    @staticmethod
    def shown(value: Any) -> str:
        """A wrong value as errors show it: its type and the value ("integer 3")."""
        return f"{_type_name(value)} {value!r}"

    def path(self, key: str) -> str:
        return f"{self.where}.{key}"

    def wrong(self, key: str, expected: str, value: Any) -> SpecError:
        """The error for field `key` holding `value` instead of `expected` ("a string")."""
        return self.error(f"{self.path(key)} must be {expected}, got {self.shown(value)}")

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def string(self, key: str, *, required: bool = False) -> str:
        value = self.raw.get(key)
        if value is None or (required and value == ""):
            if required:
                raise self.error(f"{self.path(key)} is required")
            return ""
        if not isinstance(value, str):
            raise self.wrong(key, "a string", value)
        return value

    def boolean(self, key: str) -> bool:
        value = self.raw.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.wrong(key, "true or false", value)
        return value

    def integer(self, key: str, *, minimum: int = 0) -> int:
        value = self.raw.get(key)
        if value is None:
            return 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.wrong(key, "an integer", value)
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

    def string_map(self, key: str) -> dict[str, str]:
        """An object of strings (labels, annotations, a node selector); empty when absent."""
        values = self.section(key)
        for name, value in values.raw.items():
            if not isinstance(value, str):
                raise values.wrong(name, "a string", value)
        return {str(name): value for name, value in values.raw.items()}

    def child(self, key: str) -> FieldReader | None:
        """The sub-object `key`, or None when absent."""
        value = self.raw.get(key)
        return None if value is None else type(self)(value, self.path(key), self.error)

    def section(self, key: str) -> FieldReader:
        """The sub-object `key`; an empty one when absent."""
        return type(self)(self.raw.get(key), self.path(key), self.error)

    def mapping(self, key: str) -> JsonDict | None:
        """A sub-object passed on as it is (a Kubernetes type such as an affinity), or None when
        absent; only its being an object is checked."""
        reader = self.child(key)
        return None if reader is None else reader.raw

    def objects(self, key: str) -> tuple[JsonDict, ...]:
        """A list of objects passed on as they are (tolerations, env entries); empty when absent."""
        value = self.raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(f"{self.path(key)} must be a list, got {self.type_of(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise self.error(f"{self.path(key)}[{index}] must be an object, got {self.shown(item)}")
        return tuple(value)


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

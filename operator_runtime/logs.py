"""Log output a person can follow (text) or a log pipeline can parse (JSON lines).

Every line about one object carries its `namespace/name`: loggers from `object_logger` attach
it to each record, the text format prints it before the message and the JSON format in a field
the operator names after its kind (`cluster`, `backup`, ...).
"""
from __future__ import annotations

import json
import logging
import sys
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("text", "json")
# The record attributes an object logger sets: the object's "namespace/name", and the JSON field
# it goes in.
OBJECT_ATTRIBUTE = "object_key"
FIELD_ATTRIBUTE = "object_field"
DEFAULT_OBJECT_FIELD = "object"
# Loggers of the libraries that send credentials (object-store SDKs and their HTTP clients): never
# below INFO, as they print request headers, signed URLs and tokens at DEBUG.
CREDENTIAL_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "azure", "oss2", "google.auth",
                      "google.resumable_media", "requests_oauthlib")


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """`2024-01-01T12:00:00.123Z INFO some_operator.worker: ns/name: message`"""

    def format(self, record: logging.LogRecord) -> str:
        key = getattr(record, OBJECT_ATTRIBUTE, None)
        message = record.getMessage()
        if key:
            message = f"{key}: {message}"
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {message}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, and the object (in its field) /
    exception when present."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        key = getattr(record, OBJECT_ATTRIBUTE, None)
        if key:
            entry[str(getattr(record, FIELD_ATTRIBUTE, None) or DEFAULT_OBJECT_FIELD)] = key
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(fmt: str = "text", level: str = "INFO") -> None:
    """Send all logging to stderr in `fmt` ("text" or "json") at `level` (e.g. "INFO");
    replaces handlers set up earlier, so calling it twice is harmless."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {fmt!r}")
    numeric_level = logging.getLevelName(level.upper())
    if not isinstance(numeric_level, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(numeric_level)
    # The kubernetes client logs every request body at DEBUG; keep that out of our DEBUG. The
    # object-store SDKs log request headers (botocore: the signed Authorization header, the session
    # token; urllib3 and azure: the request lines and headers; oss2 and google-auth their requests)
    # at DEBUG: credentials must never reach a log, whatever --log-level says.
    for name in ("kubernetes", *CREDENTIAL_LOGGERS):
        logging.getLogger(name).setLevel(max(numeric_level, logging.INFO))


class ObjectLoggerAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Adds the object's `namespace/name` to every record (keeping any other `extra`)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def object_logger(
    namespace: str, name: str, logger: logging.Logger, *, field: str = DEFAULT_OBJECT_FIELD
) -> ObjectLoggerAdapter:
    """A logger for lines about one object; JSON lines carry its `namespace/name` in `field`."""
    return ObjectLoggerAdapter(logger, {OBJECT_ATTRIBUTE: f"{namespace}/{name}", FIELD_ATTRIBUTE: field})
